//! The acyclicity check: a graph built in submission order is acyclic by construction, so only
//! explicit edges that point forward can close a cycle; one is found and reported by its tasks.

use alloc::vec::Vec;

use super::GraphBuilder;
use crate::graph::GraphError;

impl GraphBuilder<'_> {
    /// Reject dependency cycles (possible only through [`GraphBuilder::depend`] edges that
    /// point forward). Reports tasks on one cycle.
    pub fn check_acyclic(&self) -> Result<(), GraphError> {
        if !self.backward_edges {
            return Ok(());
        }
        let n = self.nodes.len();
        let mut indeg: Vec<u32> = self.nodes.iter().map(|x| x.fanin.len() as u32).collect();
        let mut consumers: Vec<Vec<u32>> = alloc::vec![Vec::new(); n];
        for (c, node) in self.nodes.iter().enumerate() {
            for &p in &node.fanin {
                consumers[p as usize].push(c as u32);
            }
        }
        let mut stack: Vec<u32> = (0..n as u32).filter(|&i| indeg[i as usize] == 0).collect();
        let mut seen = 0;
        while let Some(t) = stack.pop() {
            seen += 1;
            for &c in &consumers[t as usize] {
                indeg[c as usize] -= 1;
                if indeg[c as usize] == 0 {
                    stack.push(c);
                }
            }
        }
        if seen == n {
            return Ok(());
        }
        // Walk producers among the unresolved tasks until one repeats: that is a cycle.
        let start = (0..n).find(|&i| indeg[i] > 0).unwrap_or(0) as u32;
        let mut path: Vec<u32> = Vec::new();
        let mut cur = start;
        loop {
            if let Some(pos) = path.iter().position(|&x| x == cur) {
                let mut tasks = path.split_off(pos);
                tasks.sort_unstable();
                tasks.truncate(16);
                return Err(GraphError::Cycle { tasks });
            }
            path.push(cur);
            cur = match self.nodes[cur as usize].fanin.iter().find(|&&p| indeg[p as usize] > 0) {
                Some(&p) => p,
                None => return Err(GraphError::Cycle { tasks: path }),
            };
        }
    }
}
