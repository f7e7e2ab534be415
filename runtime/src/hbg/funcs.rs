//! The func table: the kernels a device knows, by func id, with their names and a binary per
//! core type. The graph builder checks each task's lanes against it and emits it into the image.

use alloc::string::String;
use alloc::vec::Vec;

use pto_hal::CoreType;

use crate::graph::GraphError;
use crate::layout::MAX_FUNC_ID;

/// The kernels a device knows: func id → name and binary per core type.
#[derive(Clone, Debug, Default)]
pub struct FuncTable {
    entries: Vec<Option<FuncInfo>>,
}

/// One registered func id.
#[derive(Clone, Debug)]
pub struct FuncInfo {
    /// The name given at registration.
    pub name: String,
    /// Binary for AIC cores, if loaded.
    pub aic: Option<u64>,
    /// Binary for AIV cores, if loaded.
    pub aiv: Option<u64>,
}

impl FuncTable {
    /// Record `bin` as func `id`'s binary for `core`.
    pub fn insert(&mut self, id: u16, name: &str, core: CoreType, bin: u64) -> Result<(), GraphError> {
        if id as u32 >= MAX_FUNC_ID {
            return Err(GraphError::UnknownFunc { task: u32::MAX, lane: 0, func: id });
        }
        let i = id as usize;
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        let e = self.entries[i].get_or_insert_with(|| FuncInfo { name: String::from(name), aic: None, aiv: None });
        match core {
            CoreType::Aic => e.aic = Some(bin),
            CoreType::Aiv => e.aiv = Some(bin),
        }
        Ok(())
    }
    /// The entry of `id`.
    pub fn get(&self, id: u16) -> Option<&FuncInfo> {
        self.entries.get(id as usize)?.as_ref()
    }
    /// The name of the func one of whose binaries is `bin` (a kernel fault's detail word).
    pub fn name_of_binary(&self, bin: u64) -> Option<&str> {
        self.entries.iter().flatten().find(|f| f.aic == Some(bin) || f.aiv == Some(bin)).map(|f| f.name.as_str())
    }
    /// Number of slots (highest id + 1).
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(Option::is_none)
    }
    /// The next unused func id.
    pub fn next_free(&self) -> Option<u16> {
        let i = self.entries.iter().position(Option::is_none).unwrap_or(self.entries.len());
        (i < MAX_FUNC_ID as usize).then_some(i as u16)
    }
}
