//! AICore executors.
//!
//! [`legacy`] is the executor where the AICPU dispatches and the core executes; [`resident`]
//! is the one where the cores schedule the host-built graph themselves. Both share one AICore
//! entry point ([`legacy::aicore_entry`]): report, window, then the executor the launch
//! descriptor names, then EXIT and the teardown gate.

pub mod resident;

pub mod legacy {
    //! The legacy AICore executor: report, wait for the window, then for every dispatch id in
    //! DMB: read the payload, ACK, run the kernel, publish its outputs, store barrier, FIN; leave
    //! on EXIT, then wait for the teardown-gate release.

    use pto_hal::{AicoreAgent, AicoreLaunch, CoreType, GmAddr, GmMemory, KernelContext, MAX_TENSOR_DIMS, TensorArg};
    use zerocopy::IntoBytes;

    use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
    use crate::layout::{
        ArgsHeader, DESC_MAGIC, DispatchPayload, LAYOUT_VERSION, MAX_SCALAR_ARGS, MAX_TENSOR_ARGS, TENSOR_WRITTEN,
        TensorDesc, TraceRecord, executor_mode, offsets, regs, trace_kind,
    };
    use crate::lifecycle::{self, Fault, RunMap};

    /// Status the executor returns when its configuration is unusable.
    pub const STATUS_BAD_DESC: i32 = -202;
    /// Status when the window never opened within budget.
    pub const STATUS_WINDOW_TIMEOUT: i32 = -8;
    /// Status when no dispatch and no EXIT arrived within budget.
    pub const STATUS_IDLE_TIMEOUT: i32 = -9;
    /// Status when the AICPU abandoned the core at its teardown gate (it did not acknowledge
    /// EXIT in time) instead of releasing it.
    pub const STATUS_NOT_RELEASED: i32 = -6;
    /// COND value a core writes instead of `fin(id)` when the dispatch it acknowledged faulted
    /// (after latching the fault): the AICPU never counts that subtask done, so its task never
    /// completes, is never recorded after completion and releases no consumer. In the reserved
    /// range, so [`decide`](crate::sched::decide) matches it to no slot. After it the core
    /// runs nothing more: it waits for EXIT. (A register value of the AICPU ↔ AICore protocol,
    /// kept beside its writer until `layout::regs` is split.)
    pub const COND_FAULTED: u32 = regs::COND_FIN | 0x7FFF_FFFC;

    /// The AICore program entry point of the legacy executor.
    pub fn aicore_entry<A: AicoreAgent>(a: &A, launch: AicoreLaunch) -> i32 {
        let desc = launch.args;
        let cfg = lifecycle::read_config_core(a, desc);
        let known_mode = matches!(
            cfg.executor,
            executor_mode::RESIDENT_PENDING | executor_mode::LEGACY_GRAPH | executor_mode::LEGACY_UNSUPPORTED_SHAPE
        );
        if cfg.magic != DESC_MAGIC || cfg.version != LAYOUT_VERSION || launch.block_idx >= cfg.workers || !known_mode {
            return STATUS_BAD_DESC;
        }
        let map = RunMap { desc, cfg };
        let mut trace = crate::trace::TraceRing::open(&cfg, true, launch.block_idx);
        lifecycle::report(a, &map, &launch);

        let budget = cfg.core_wait_ticks;
        match lifecycle::wait_window(a, &map, launch.block_idx, a.now_ticks().saturating_add(budget)) {
            Ok(_) => {}
            Err(lifecycle::NoWindow::Cancelled) => return 0,
            Err(lifecycle::NoWindow::Timeout) => {
                let f = Fault {
                    code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                    site: Site::Window,
                    task: None,
                    core: Some(launch.block_idx),
                    detail: 0,
                };
                lifecycle::latch(a, desc, f, "");
                return STATUS_WINDOW_TIMEOUT;
            }
        }
        a.write_cond(regs::COND_IDLE);

        // The executor the descriptor names serves until EXIT (`Ok`) or gives up (`Err`: its
        // status, the fault latched).
        let served = if cfg.executor == executor_mode::RESIDENT_PENDING {
            match resident_ready(a, &map, launch.block_idx) {
                Go::Ready => match super::resident::serve(a, &map, &launch, &mut trace) {
                    super::resident::Served::Exit => Ok(()),
                    super::resident::Served::IdleTimeout => Err(STATUS_IDLE_TIMEOUT),
                },
                Go::Exit => Ok(()),
                Go::Timeout => Err(STATUS_WINDOW_TIMEOUT),
            }
        } else {
            dispatch_loop(a, &map, &launch, &mut trace)
        };
        if cfg.executor == executor_mode::RESIDENT_PENDING
            && crate::breakage::broken(crate::breakage::RESIDENT_EXIT_DIRTY)
        {
            // Broken on purpose: the reference's resident exit, which writes its handshake
            // line and ends with no final write-back.
            a.write(map.handshake(launch.block_idx).offset(12), &1u32.to_le_bytes());
        }
        if let Err(status) = served {
            return status;
        }
        if let Some(t) = &trace {
            t.close(a);
        }
        a.store_barrier();
        a.write_cond(regs::COND_EXITED);
        match lifecycle::wait_release(a, &map, launch.block_idx, budget) {
            lifecycle::Release::Released => 0,
            lifecycle::Release::Abandoned => STATUS_NOT_RELEASED,
        }
    }

    /// The legacy executor's loop: run every dispatch id DMB names until EXIT (`Ok`), or until
    /// the core's wait budget passes without a dispatch (`Err`, the fault latched).
    fn dispatch_loop<A: AicoreAgent>(
        a: &A,
        map: &RunMap,
        launch: &AicoreLaunch,
        trace: &mut Option<crate::trace::TraceRing>,
    ) -> Result<(), i32> {
        let budget = map.cfg.core_wait_ticks;
        let mut last = regs::DMB_IDLE;
        let mut deadline = a.now_ticks().saturating_add(budget);
        // After a faulted dispatch the core takes no other (the one pending behind it was
        // dispatched before the latch, but the run is over): only EXIT ends the wait.
        let mut faulted = false;
        loop {
            let v = a.read_dmb();
            if v == regs::DMB_EXIT {
                return Ok(());
            }
            if v == last || v == regs::DMB_IDLE || v == 0 || faulted {
                if a.now_ticks() >= deadline {
                    lifecycle::latch(
                        a,
                        map.desc,
                        Fault {
                            code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                            site: Site::CoreIdle,
                            task: None,
                            core: Some(launch.block_idx),
                            detail: v as u64,
                        },
                        "",
                    );
                    return Err(STATUS_IDLE_TIMEOUT);
                }
                a.wait_for_event(deadline);
                continue;
            }
            a.rmb();
            last = v;
            faulted = run_one(a, map, launch, v, trace);
            deadline = a.now_ticks().saturating_add(budget);
        }
    }

    /// What a resident core found while waiting for the AICPU's go.
    enum Go {
        /// The AICPU validated the image: schedule.
        Ready,
        /// EXIT came first (the image was refused, or the run stopped).
        Exit,
        /// Neither within the core's wait budget (the fault is latched).
        Timeout,
    }

    /// Wait until the AICPU says the image is valid (this run's
    /// [`resident_ready_word`](crate::layout::resident_ready_word) in the run line, read
    /// device-direct: never the configuration's cached copy, never an earlier run's word) or
    /// sends EXIT.
    fn resident_ready<A: AicoreAgent>(a: &A, map: &RunMap, w: u32) -> Go {
        let at = map.desc.offset(offsets::RUN_RESIDENT_READY);
        let deadline = a.now_ticks().saturating_add(map.cfg.core_wait_ticks);
        loop {
            if a.read_dmb() == regs::DMB_EXIT {
                return Go::Exit;
            }
            let v = a.query(at);
            if v == crate::layout::resident_ready_word(map.cfg.epoch) {
                return Go::Ready;
            }
            let now = a.now_ticks();
            if now >= deadline {
                let f = Fault {
                    code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                    site: Site::Window,
                    task: None,
                    core: Some(w),
                    detail: v,
                };
                lifecycle::latch(a, map.desc, f, "");
                return Go::Timeout;
            }
            a.wait_for_word(at, v, deadline.min(now.saturating_add(a.ticks_from_micros(1_000))));
        }
    }

    /// Run dispatch `id`; `true` when it faulted (the fault latched, [`COND_FAULTED`] written
    /// instead of FIN).
    fn run_one<A: AicoreAgent>(
        a: &A,
        map: &RunMap,
        launch: &AicoreLaunch,
        id: u32,
        trace: &mut Option<crate::trace::TraceRing>,
    ) -> bool {
        let at = map.payload(launch.block_idx, id & 1);
        if !crate::breakage::broken(crate::breakage::SKIP_PAYLOAD_OBSERVE) {
            a.observe_line(at);
        }
        let mut p = DispatchPayload::default();
        a.read(at, p.as_mut_bytes());
        a.write_cond(regs::ack(id));
        let start = if trace.is_some() { a.now_ticks() } else { 0 };
        let w = launch.block_idx;
        let faulted = core::cell::Cell::new(false);
        let fault = |code: ErrorCode, detail: u64, text: &str| {
            faulted.set(true);
            lifecycle::latch(
                a,
                map.desc,
                Fault { code, site: Site::Kernel, task: Some(p.task_id), core: Some(w), detail },
                text,
            );
        };
        if p.reg_task_id != id {
            fault(
                ErrorCode::Device(DeviceFault::BadImage),
                ((p.reg_task_id as u64) << 32) | id as u64,
                "payload does not carry the dispatched id",
            );
        } else {
            match a.resolve_kernel(p.bin) {
                None => fault(
                    ErrorCode::Device(DeviceFault::UnknownKernel),
                    p.bin,
                    "kernel binary not loaded for this core type",
                ),
                Some(kernel) => {
                    let mut ctx = CoreCtx::load(a, &p, launch.core_type);
                    if let Some(i) = ctx.malformed() {
                        // Nothing of a malformed record is touched: no invalidate over a
                        // garbage range, no kernel on garbage views.
                        fault(
                            ErrorCode::Device(DeviceFault::BadImage),
                            i as u64,
                            "malformed argument record (a stale or corrupt read of its tensor descriptors)",
                        );
                        return finished(a, id, true);
                    }
                    ctx.observe_arguments(a);
                    if let Err(e) = a.run_kernel(kernel, &mut ctx) {
                        fault(ErrorCode::Device(DeviceFault::KernelFault), p.bin, e.as_str());
                    }
                    if crate::breakage::broken(crate::breakage::FIN_BEFORE_PUBLISH) && !faulted.get() {
                        a.write_cond(regs::fin(id));
                    }
                    ctx.publish_outputs(a);
                }
            }
        }
        if let Some(t) = trace {
            let r = TraceRecord {
                kind: trace_kind::SUBTASK,
                lane: if launch.core_type == CoreType::Aic { 0 } else { 1 + p.lane.min(1) as u8 },
                core: w,
                task: p.task_id,
                block: p.block_idx,
                bin: p.bin,
                start,
                end: a.now_ticks(),
                ..TraceRecord::default()
            };
            t.push(a, &r);
        }
        finished(a, id, faulted.get())
    }

    /// Report the end of dispatch `id` (its outputs written back): `fin(id)`, or
    /// [`COND_FAULTED`] when it faulted. Returns whether it reported a fault.
    fn finished<A: AicoreAgent>(a: &A, id: u32, faulted: bool) -> bool {
        // Broken on purpose: a faulted dispatch reports a plain FIN (its consumers released).
        let faulted = faulted && !crate::breakage::broken(crate::breakage::RELEASE_ON_FAULT);
        a.store_barrier();
        a.write_cond(if faulted { COND_FAULTED } else { regs::fin(id) });
        faulted
    }

    /// What a kernel sees: its payload's arguments, read once from the image.
    pub(crate) struct CoreCtx<'a> {
        gm: &'a dyn GmMemory,
        tensors: [TensorDesc; MAX_TENSOR_ARGS],
        scalars: [u64; MAX_SCALAR_ARGS],
        nt: usize,
        ns: usize,
        p: DispatchPayload,
        core_type: CoreType,
    }

    impl<'a> CoreCtx<'a> {
        pub(crate) fn load<A: AicoreAgent>(a: &'a A, p: &DispatchPayload, core_type: CoreType) -> CoreCtx<'a> {
            let mut ctx = CoreCtx {
                gm: a.as_gm(),
                tensors: [TensorDesc::default(); MAX_TENSOR_ARGS],
                scalars: [0; MAX_SCALAR_ARGS],
                nt: 0,
                ns: 0,
                p: *p,
                core_type,
            };
            let args = GmAddr(p.args);
            let mut h = ArgsHeader::default();
            let observe_args = !crate::breakage::broken(crate::breakage::SKIP_ARGS_OBSERVE);
            if observe_args {
                a.observe_lines(args, crate::layout::ARGS_HEAD);
            }
            a.read(args, h.as_mut_bytes());
            let nt = (h.tensors as usize).min(MAX_TENSOR_ARGS);
            let ns = (h.scalars as usize).min(MAX_SCALAR_ARGS);
            let tb = (nt * 64) as u64;
            let body = args.offset(crate::layout::ARGS_HEAD);
            if observe_args {
                a.observe_lines(body, tb + ns as u64 * 8);
            }
            a.read(body, ctx.tensors[..nt].as_mut_bytes());
            a.read(body.offset(tb), ctx.scalars[..ns].as_mut_bytes());
            ctx.nt = nt;
            ctx.ns = ns;
            ctx
        }

        /// The first tensor descriptor no kernel could have been given, if any: a rank outside
        /// `1..=5`, an unknown element type or size, or a view whose span overflows or exceeds
        /// any device memory (2^40 bytes).
        pub(crate) fn malformed(&self) -> Option<usize> {
            self.tensors[..self.nt].iter().position(|t| {
                let size_ok =
                    crate::graph::DType::try_from(t.dtype).is_ok_and(|d| d.size() == t.elem_bytes && d.size() != 0);
                if !(1..=MAX_TENSOR_DIMS as u32).contains(&t.ndims) || !size_ok {
                    return true;
                }
                span(t).is_none_or(|(lo, hi)| hi - lo >= 1 << 40)
            })
        }

        /// Drop this core's copies of every argument's lines before the kernel runs: inputs were
        /// produced by other cores or the host, and outputs must be filled fresh so that their
        /// whole-line write-backs carry nobody's stale bytes.
        pub(crate) fn observe_arguments<A: AicoreAgent>(&self, a: &A) {
            // Spans were checked by `malformed` before the kernel was allowed to run.
            for (lo, hi) in self.tensors[..self.nt].iter().filter_map(span) {
                a.observe_lines(GmAddr(lo), hi - lo);
            }
        }

        /// Write back every line of every output, so it reaches memory before FIN.
        pub(crate) fn publish_outputs<A: AicoreAgent>(&self, a: &A) {
            let written = self.tensors[..self.nt].iter().filter(|t| t.flags & TENSOR_WRITTEN != 0);
            for (lo, hi) in written.filter_map(span) {
                a.publish_lines(GmAddr(lo), hi - lo);
            }
        }
    }

    /// `[first byte, one past the last byte)` a view can touch; `None` when it overflows.
    fn span(t: &TensorDesc) -> Option<(u64, u64)> {
        let mut last = 0u64;
        for k in 0..(t.ndims as usize).min(MAX_TENSOR_DIMS) {
            let step = (t.shape[k].max(1) as u64 - 1).checked_mul(t.strides[k] as u64)?;
            last = last.checked_add(step)?;
        }
        let bytes = (last + 1).checked_mul(t.elem_bytes as u64)?;
        Some((t.addr, t.addr.checked_add(bytes)?))
    }

    impl KernelContext for CoreCtx<'_> {
        fn tensor(&self, i: usize) -> Option<TensorArg> {
            self.tensors[..self.nt].get(i).map(TensorDesc::to_arg)
        }
        fn tensor_count(&self) -> usize {
            self.nt
        }
        fn scalar(&self, i: usize) -> Option<u64> {
            self.scalars[..self.ns].get(i).copied()
        }
        fn scalar_count(&self) -> usize {
            self.ns
        }
        fn block_idx(&self) -> u32 {
            self.p.block_idx
        }
        fn block_num(&self) -> u32 {
            self.p.block_num
        }
        fn sub_block_id(&self) -> u32 {
            self.p.lane
        }
        fn core_type(&self) -> CoreType {
            self.core_type
        }
        fn task_id(&self) -> u32 {
            self.p.task_id
        }
        fn writable(&self, i: usize) -> bool {
            i < self.nt && self.tensors[i].flags & TENSOR_WRITTEN != 0
        }

        fn gm(&self) -> &dyn GmMemory {
            self.gm
        }
    }
}
