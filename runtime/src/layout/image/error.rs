//! Why a graph image is refused: the first check [`ImageView`](super::ImageView) failed, its
//! text, and the detail word the AICPU latches with `BAD_IMAGE`.

/// Why an image is refused: the first check that failed. [`ImageError::detail`] is the word
/// the AICPU latches with `BAD_IMAGE`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ImageError {
    /// Shorter than its header.
    Short,
    /// Wrong magic or version, or a total length other than the one published.
    Header,
    /// The task, fan-out or func region does not fit in the image.
    Regions,
    /// The task's argument record lies outside the image or is shorter than its header.
    ArgsOutside {
        /// The task.
        task: u32,
    },
    /// The task's lanes do not match its shape, or its block count is impossible.
    Shape {
        /// The task.
        task: u32,
    },
    /// The task's consumers lie outside the fan-out array.
    Fanout {
        /// The task.
        task: u32,
    },
    /// The task's argument record length disagrees with its tensor and scalar counts.
    ArgsLength {
        /// The task.
        task: u32,
    },
    /// The fan-in counts do not add up to the fan-out array, or a consumer id is out of range.
    Edges,
    /// An active lane names a func with no binary for that lane's core type.
    NoBinary {
        /// The task.
        task: u32,
        /// The lane (0 = AIC, 1 and 2 = AIV).
        lane: u8,
    },
    /// A misaligned predicate or an unknown argument flag.
    ArgsFlags {
        /// The task.
        task: u32,
    },
}

impl ImageError {
    /// The detail word of the `BAD_IMAGE` fault: the check in the low byte (bits 8–11 for a
    /// task's check, with the task in bits 16–47 and a lane in bits 0–7).
    pub const fn detail(&self) -> u64 {
        const fn at(check: u64, task: u32) -> u64 {
            check | ((task as u64) << 16)
        }
        match *self {
            ImageError::Short => 1,
            ImageError::Header => 2,
            ImageError::Regions => 3,
            ImageError::Edges => 5,
            ImageError::ArgsOutside { task } => at(0x100, task),
            ImageError::Shape { task } => at(0x200, task),
            ImageError::Fanout { task } => at(0x300, task),
            ImageError::ArgsLength { task } => at(0x400, task),
            ImageError::NoBinary { task, lane } => at(0x600, task) | lane as u64,
            ImageError::ArgsFlags { task } => at(0x700, task),
        }
    }
}

impl core::fmt::Display for ImageError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ImageError::Short => f.write_str("the image is shorter than its header"),
            ImageError::Header => f.write_str("the image header has a wrong magic, version or length"),
            ImageError::Regions => f.write_str("a region of the image lies outside it"),
            ImageError::Edges => f.write_str("the fan-in counts and the fan-out array disagree"),
            ImageError::ArgsOutside { task } => write!(f, "task {task}: its argument record lies outside the image"),
            ImageError::Shape { task } => write!(f, "task {task}: its lanes or block count do not fit its shape"),
            ImageError::Fanout { task } => write!(f, "task {task}: its consumers lie outside the fan-out array"),
            ImageError::ArgsLength { task } => write!(f, "task {task}: its argument record has the wrong length"),
            ImageError::NoBinary { task, lane } => write!(f, "task {task}: lane {lane} has no kernel binary"),
            ImageError::ArgsFlags { task } => {
                write!(f, "task {task}: a misaligned predicate or an unknown argument flag")
            }
        }
    }
}
