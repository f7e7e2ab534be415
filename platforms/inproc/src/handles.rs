//! Handle tables: what a [`Handle`] a platform gave out stands for.
//!
//! A [`HandleTable`] issues the handles `base`, `base + 1`, … for its entries, in the order
//! they are added, up to a capacity, so that tables with disjoint ranges never share a handle
//! and a handle of one table is refused by another. Handles stay valid for the table's life:
//! entries are never removed or moved. A lookup of a handle the table did not issue is an
//! [`UnknownHandle`] naming the table's kind ("AICPU program", "kernel", …).
//!
//! A [`Registry`] is a table of named entries — the device programs a platform has installed
//! — where installing a name again replaces its entry in place, so the name keeps its handle.

use pto_hal::Handle;

/// A handle the table did not issue.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no {kind} is registered under handle {:#x}", handle.0)]
pub struct UnknownHandle {
    /// What the table holds.
    pub kind: &'static str,
    /// The handle looked up.
    pub handle: Handle,
}

/// The table has issued every handle of its range.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the {kind} table is full ({capacity} entries)")]
pub struct TableFull {
    /// What the table holds.
    pub kind: &'static str,
    /// How many entries it holds at most.
    pub capacity: u64,
}

/// Entries by handle: handle `base + i` is the `i`-th entry added.
#[derive(Clone, Debug)]
pub struct HandleTable<T> {
    kind: &'static str,
    base: u64,
    capacity: u64,
    entries: Vec<T>,
}

impl<T> HandleTable<T> {
    /// An empty table of `kind` issuing handles from `base`, at most `capacity` of them.
    ///
    /// # Panics
    ///
    /// When `base` is 0 (handle 0 is never issued, so a zeroed word is never a valid handle)
    /// or the range `base..base + capacity` passes the last 64-bit value. Both are constants
    /// of the platform; in a `static` the check happens when compiling.
    pub const fn new(kind: &'static str, base: u64, capacity: u64) -> HandleTable<T> {
        assert!(base != 0, "handle 0 is never issued");
        assert!(base.checked_add(capacity).is_some(), "the handle range passes u64::MAX");
        HandleTable { kind, base, capacity, entries: Vec::new() }
    }

    /// What the table holds, for messages.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in handle order (entry `i` has handle `base + i`).
    pub fn entries(&self) -> &[T] {
        &self.entries
    }

    /// The handle of entry `i`, if the table holds one there.
    fn handle_of(&self, i: usize) -> Option<Handle> {
        (i < self.entries.len()).then(|| Handle(self.base + i as u64))
    }

    /// The index of `handle`'s entry, if this table issued it.
    fn index_of(&self, handle: Handle) -> Option<usize> {
        let i = usize::try_from(handle.0.checked_sub(self.base)?).ok()?;
        (i < self.entries.len()).then_some(i)
    }

    /// Add `entry` under the next handle.
    pub fn push(&mut self, entry: T) -> Result<Handle, TableFull> {
        let i = self.entries.len();
        match u64::try_from(i) {
            Ok(n) if n < self.capacity => {
                self.entries.push(entry);
                // In range: `base + capacity` fits (checked by `new`) and `n < capacity`.
                Ok(Handle(self.base + n))
            }
            _ => Err(TableFull { kind: self.kind, capacity: self.capacity }),
        }
    }

    /// The handle of the first entry `matches` accepts.
    pub fn find(&self, matches: impl FnMut(&T) -> bool) -> Option<Handle> {
        self.handle_of(self.entries.iter().position(matches)?)
    }

    /// The handle of the first entry `matches` accepts, or of `entry`, added now.
    pub fn find_or_push(&mut self, entry: T, matches: impl FnMut(&T) -> bool) -> Result<Handle, TableFull> {
        match self.find(matches) {
            Some(h) => Ok(h),
            None => self.push(entry),
        }
    }

    /// The entry of `handle`.
    pub fn get(&self, handle: Handle) -> Result<&T, UnknownHandle> {
        match self.index_of(handle) {
            Some(i) => Ok(&self.entries[i]),
            None => Err(UnknownHandle { kind: self.kind, handle }),
        }
    }

    /// The entry of `handle`, to change it (its handle stays).
    pub fn get_mut(&mut self, handle: Handle) -> Result<&mut T, UnknownHandle> {
        match self.index_of(handle) {
            Some(i) => Ok(&mut self.entries[i]),
            None => Err(UnknownHandle { kind: self.kind, handle }),
        }
    }
}

/// Named entries (installed device programs) by handle; a name installed again keeps its
/// handle and takes the new entry.
#[derive(Clone, Debug)]
pub struct Registry<E> {
    table: HandleTable<(&'static str, E)>,
}

impl<E: Copy> Registry<E> {
    /// An empty registry of `kind` issuing handles from `base`, at most `capacity` of them
    /// (see [`HandleTable::new`], which panics as this does).
    pub const fn new(kind: &'static str, base: u64, capacity: u64) -> Registry<E> {
        Registry { table: HandleTable::new(kind, base, capacity) }
    }

    /// Install `entry` as `name`: in place of the entry already installed under that name
    /// (same handle), else under a new handle.
    pub fn install(&mut self, name: &'static str, entry: E) -> Result<Handle, TableFull> {
        match self.table.find(|p| p.0 == name) {
            Some(h) => {
                if let Ok(p) = self.table.get_mut(h) {
                    p.1 = entry;
                }
                Ok(h)
            }
            None => self.table.push((name, entry)),
        }
    }

    /// The handle of the entry installed as `name`.
    pub fn handle(&self, name: &str) -> Option<Handle> {
        self.table.find(|p| p.0 == name)
    }

    /// The name and entry of `handle`.
    pub fn entry(&self, handle: Handle) -> Result<(&'static str, E), UnknownHandle> {
        self.table.get(handle).copied()
    }

    /// The number of names installed.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether nothing is installed.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_count_from_the_base_and_stay() {
        let mut t = HandleTable::new("kernel", 0x4b00_0000, 16);
        assert_eq!(t.push('a'), Ok(Handle(0x4b00_0000)));
        assert_eq!(t.push('b'), Ok(Handle(0x4b00_0001)));
        assert_eq!(t.get(Handle(0x4b00_0001)), Ok(&'b'));
        assert_eq!(t.find(|&c| c == 'a'), Some(Handle(0x4b00_0000)));
        assert_eq!(t.find_or_push('b', |&c| c == 'b'), Ok(Handle(0x4b00_0001)));
        assert_eq!(t.find_or_push('c', |&c| c == 'c'), Ok(Handle(0x4b00_0002)));
        *t.get_mut(Handle(0x4b00_0000)).unwrap() = 'z';
        assert_eq!(t.entries(), ['z', 'b', 'c']);
        assert_eq!((t.len(), t.is_empty(), t.kind()), (3, false, "kernel"));
    }

    #[test]
    fn unknown_handles_are_refused_by_name() {
        let mut t = HandleTable::new("AICPU program", 0x4400_0000, 16);
        t.push(1u8).unwrap();
        for h in [0, 1, 0x43ff_ffff, 0x4400_0001, 0x4400_0010, u64::MAX] {
            let e = t.get(Handle(h)).unwrap_err();
            assert_eq!(e, UnknownHandle { kind: "AICPU program", handle: Handle(h) });
            assert_eq!(e.to_string(), format!("no AICPU program is registered under handle {h:#x}"));
        }
        assert!(t.get_mut(Handle(0x4400_0001)).is_err());
    }

    #[test]
    fn a_full_table_refuses_more() {
        let mut t = HandleTable::new("orchestration", u64::MAX - 2, 2);
        assert_eq!(t.push(()), Ok(Handle(u64::MAX - 2)));
        assert_eq!(t.push(()), Ok(Handle(u64::MAX - 1)));
        assert_eq!(t.push(()), Err(TableFull { kind: "orchestration", capacity: 2 }));
        assert_eq!(t.get(Handle(u64::MAX)).unwrap_err().handle, Handle(u64::MAX));
        let mut empty: HandleTable<()> = HandleTable::new("nothing", 1, 0);
        assert!(empty.push(()).is_err());
    }

    #[test]
    #[should_panic(expected = "handle 0 is never issued")]
    fn base_zero_is_refused() {
        let _ = HandleTable::<()>::new("kernel", 0, 1);
    }

    #[test]
    #[should_panic(expected = "passes u64::MAX")]
    fn a_range_past_the_last_value_is_refused() {
        let _ = HandleTable::<()>::new("kernel", u64::MAX, 2);
    }

    #[test]
    fn a_table_can_be_a_static() {
        static T: parking_lot::Mutex<HandleTable<u32>> = parking_lot::Mutex::new(HandleTable::new("program", 1, 8));
        let h = T.lock().push(5).unwrap();
        assert_eq!(T.lock().get(h), Ok(&5));
    }

    #[test]
    fn reinstalling_a_name_keeps_its_handle_and_the_others() {
        let mut r = Registry::new("AICore program", 0xA1C1_0000, 0x1_0000);
        let a = r.install("a", 1u32).unwrap();
        let b = r.install("b", 2).unwrap();
        assert_eq!(r.install("a", 10), Ok(a));
        assert_eq!(r.entry(a), Ok(("a", 10)));
        assert_eq!(r.entry(b), Ok(("b", 2)));
        assert_eq!((r.handle("a"), r.handle("b"), r.handle("c")), (Some(a), Some(b), None));
        assert_eq!(r.len(), 2);
        assert!(!r.is_empty());
        assert_eq!(r.entry(Handle(0xA1C0_0000)).unwrap_err().kind, "AICore program");
    }
}
