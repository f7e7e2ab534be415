//! Emitting the image: header, task records, fan-out lists, the func table and the argument
//! records, with heap tensors resolved against the graph heap's base and every offset
//! self-relative, so the image runs from wherever it is copied.

use alloc::vec::Vec;

use pto_hal::GmAddr;
use zerocopy::IntoBytes;

use super::GraphBuilder;
use crate::graph::GraphError;
use crate::layout::{FuncEntry, IMAGE_MAGIC, ImageHeader, LAYOUT_VERSION, NO_FUNC, TaskRecord};

impl GraphBuilder<'_> {
    /// Emit the image, resolving heap tensors against `heap_base`.
    pub fn emit(&self, heap_base: GmAddr) -> Result<Vec<u8>, GraphError> {
        self.check_acyclic()?;
        let n = self.nodes.len();
        let mut fanout_count = alloc::vec![0u32; n];
        for node in &self.nodes {
            for &p in &node.fanin {
                fanout_count[p as usize] += 1;
            }
        }
        let mut fanout_start = alloc::vec![0u32; n];
        let mut acc = 0u32;
        for i in 0..n {
            fanout_start[i] = acc;
            acc += fanout_count[i];
        }
        let fanout_len = acc as usize;
        let mut fanout = alloc::vec![0u32; fanout_len];
        let mut fill = fanout_start.clone();
        for (c, node) in self.nodes.iter().enumerate() {
            for &p in &node.fanin {
                fanout[fill[p as usize] as usize] = c as u32;
                fill[p as usize] += 1;
            }
        }

        let hdr = core::mem::size_of::<ImageHeader>();
        let tasks_off = hdr;
        let fanout_off = tasks_off + n * core::mem::size_of::<TaskRecord>();
        let funcs_off = (fanout_off + fanout_len * 4).div_ceil(8) * 8;
        let func_count = self.funcs.len();
        let args_off = funcs_off + func_count * core::mem::size_of::<FuncEntry>();
        let args_bytes: usize = self.nodes.iter().map(|x| crate::args::record_len(&x.task) as usize).sum();
        let total = args_off + args_bytes;
        let mut img = alloc::vec![0u8; total];

        let header = ImageHeader {
            magic: IMAGE_MAGIC,
            version: LAYOUT_VERSION,
            task_count: n as u32,
            func_count: func_count as u32,
            total_len: total as u64,
            tasks_off: tasks_off as u64,
            fanout_off: fanout_off as u64,
            fanout_len: fanout_len as u64,
            funcs_off: funcs_off as u64,
            args_off: args_off as u64,
        };
        img[..hdr].copy_from_slice(header.as_bytes());
        for (i, &f) in fanout.iter().enumerate() {
            img[fanout_off + i * 4..fanout_off + i * 4 + 4].copy_from_slice(&f.to_le_bytes());
        }
        for id in 0..func_count {
            let e = match self.funcs.get(id as u16) {
                Some(f) => FuncEntry { aic: f.aic.unwrap_or(0), aiv: f.aiv.unwrap_or(0) },
                None => FuncEntry::default(),
            };
            let o = funcs_off + id * 16;
            img[o..o + 16].copy_from_slice(e.as_bytes());
        }
        let mut args_pos = args_off;
        for (i, node) in self.nodes.iter().enumerate() {
            let t = &node.task;
            let rec_pos = tasks_off + i * 32;
            let mut funcs = [NO_FUNC; 3];
            for (lane, f) in t.kind().lane_funcs().iter().enumerate() {
                if let Some((f, _)) = f {
                    funcs[lane] = f.0;
                }
            }
            let args_len = crate::args::record_len(t) as usize;
            let rec = TaskRecord {
                funcs,
                shape: t.kind().shape() as u8,
                lanes: t.kind().lanes(),
                block_num: t.block_num(),
                fanin: node.fanin.len() as u32,
                fanout_start: fanout_start[i],
                fanout_count: fanout_count[i],
                args_rel: (args_pos - rec_pos) as i32,
                args_len: args_len as u32,
            };
            img[rec_pos..rec_pos + 32].copy_from_slice(rec.as_bytes());
            crate::args::encode(t, heap_base, &mut img[args_pos..args_pos + args_len]);
            args_pos += args_len;
        }
        debug_assert_eq!(args_pos, total);
        Ok(img)
    }
}
