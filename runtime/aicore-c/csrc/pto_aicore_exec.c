/* The legacy executor's AICore program in C: what runtime/src/exec/entry.rs and
 * runtime/src/exec/legacy/core.rs (with runtime/src/exec/kernel_call.rs and the AICore half of
 * runtime/src/lifecycle.rs) do in Rust, step for step, over the intrinsics of
 * include/pto_aicore_intrinsics.h and the layouts of the generated include/pto_abi.h.
 *
 * Compiles as C11 (the simulator's backend) and as C++17 (the chip's, whose vendor names are
 * C++). No library function is used: the AICore has no C library. */
#include "pto_aicore_exec.h"

#define LINE_BYTES 64u
#define NO_ID UINT64_MAX

/* GM offsets of the launch descriptor's words. */
#define FATAL_AT(f) ((uint64_t)(offsetof(struct pto_launch_desc, fatal) + offsetof(struct pto_fatal_line, f)))
#define FAULT_TEXT_AT ((uint64_t)offsetof(struct pto_launch_desc, fault_text))
#define REPORT_EPOCH_AT ((uint64_t)offsetof(struct pto_handshake, report_epoch))

/* What a launch descriptor says, and where its per-worker lines are. */
struct run_map {
    uint64_t desc;
    struct pto_launch_config cfg;
};

static uint64_t handshake_at(const struct run_map *m, uint32_t w)
{
    return m->cfg.handshakes + (uint64_t)w * sizeof(struct pto_handshake);
}

static uint64_t gate_at(const struct run_map *m, uint32_t w)
{
    return m->cfg.gates + (uint64_t)w * sizeof(struct pto_teardown_gate);
}

static uint64_t payload_at(const struct run_map *m, uint32_t w, uint32_t buf)
{
    return m->cfg.payloads + (uint64_t)w * 2u * sizeof(struct pto_dispatch_payload) +
           (uint64_t)(buf & 1u) * sizeof(struct pto_dispatch_payload);
}

static uint64_t cancel_value(uint64_t epoch) { return epoch | ((uint64_t)1 << 63); }

static uint32_t cond_ack(uint32_t id) { return id & 0x7FFFFFFFu; }

static uint32_t cond_fin(uint32_t id) { return PTO_COND_FIN | (id & 0x7FFFFFFFu); }

static int broken(struct pto_ai *ai, uint64_t bit) { return (pto_ai_broken(ai) & bit) != 0; }

static void zero(void *p, uint32_t len)
{
    uint8_t *b = (uint8_t *)p;
    for (uint32_t i = 0; i < len; i++) {
        b[i] = 0;
    }
}

static uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* ---- Cache maintenance composites (pto_hal::AicoreCache's provided methods). ---- */

/* The first line of [addr, addr+len) and how many lines it covers. */
static uint64_t line_count(uint64_t addr, uint64_t len, uint64_t *first)
{
    *first = addr & ~(uint64_t)(LINE_BYTES - 1u);
    if (len == 0) {
        return 0;
    }
    uint64_t last = addr > UINT64_MAX - (len - 1) ? UINT64_MAX : addr + (len - 1);
    return ((last & ~(uint64_t)(LINE_BYTES - 1u)) - *first) / LINE_BYTES + 1u;
}

/* Drop every line of the range, then barrier: the next loads come from memory. */
static void observe_lines(struct pto_ai *ai, uint64_t addr, uint64_t len)
{
    uint64_t first;
    uint64_t n = line_count(addr, len, &first);
    for (uint64_t i = 0; i < n; i++) {
        pto_ai_line_invalidate(ai, first + i * LINE_BYTES);
    }
    pto_ai_cache_barrier(ai);
}

/* Write back every line of the range, then barrier. */
static void publish_lines(struct pto_ai *ai, uint64_t addr, uint64_t len)
{
    uint64_t first;
    uint64_t n = line_count(addr, len, &first);
    for (uint64_t i = 0; i < n; i++) {
        pto_ai_line_writeback(ai, first + i * LINE_BYTES);
    }
    pto_ai_cache_barrier(ai);
}

static void observe_line(struct pto_ai *ai, uint64_t addr) { observe_lines(ai, addr, 1); }

static void publish_line(struct pto_ai *ai, uint64_t addr) { publish_lines(ai, addr, 1); }

/* ---- The back-off between the polls of a budgeted wait (runtime/src/backoff.rs). ---- */

#define BACKOFF_FIRST_NS 64u
#define BACKOFF_MAX_NS 1000u

struct backoff {
    uint32_t next_ns;
    uint32_t has_last;
    uint64_t last_addr;
    uint64_t last_seen;
};

static void backoff_init(struct backoff *b)
{
    b->next_ns = 0;
    b->has_last = 0;
    b->last_addr = 0;
    b->last_seen = 0;
}

/* Wait until the word at `addr` may no longer hold `seen` or `until` passes; a second wait on
 * the same word for the same value backs off, doubling from 64 ns up to 1 us. */
static void backoff_wait_word(struct backoff *b, struct pto_ai *ai, uint64_t addr, uint64_t seen, uint64_t until)
{
    pto_ai_wait_word(ai, addr, seen, until);
    if (b->has_last && b->last_addr == addr && b->last_seen == seen) {
        if (b->next_ns > 0) {
            pto_ai_delay_ns(ai, b->next_ns);
        }
        uint32_t next = b->next_ns * 2u;
        b->next_ns = next < BACKOFF_FIRST_NS ? BACKOFF_FIRST_NS : (next > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : next);
    } else {
        b->has_last = 1;
        b->last_addr = addr;
        b->last_seen = seen;
        b->next_ns = BACKOFF_FIRST_NS;
    }
}

/* ---- The fatal latch (runtime/src/lifecycle.rs, `latch`). ---- */

struct fault {
    uint64_t code;
    uint64_t site;
    uint64_t task;
    uint64_t core;
    uint64_t detail;
};

/* Latch `f` unless a fault was latched before; the winner adds `text` (NUL-terminated UTF-8,
 * cut to the text lines at a character boundary). Returns whether this call won. */
static int latch(struct pto_ai *ai, uint64_t desc, const struct fault *f, const char *text)
{
    if (pto_ai_cas_dev(ai, desc + FATAL_AT(claimed), 0, 1) != 0) {
        return 0;
    }
    pto_ai_st_dev(ai, desc + FATAL_AT(code), f->code);
    pto_ai_st_dev(ai, desc + FATAL_AT(site), f->site);
    pto_ai_st_dev(ai, desc + FATAL_AT(task), f->task);
    pto_ai_st_dev(ai, desc + FATAL_AT(core), f->core);
    pto_ai_st_dev(ai, desc + FATAL_AT(detail), f->detail);
    uint32_t len = 0;
    while (text[len] != 0 && len < PTO_FAULT_TEXT_BYTES - 1u) {
        len++;
    }
    /* A cut inside a character moves back to its first byte. */
    while (len > 0 && text[len] != 0 && ((uint8_t)text[len] & 0xC0u) == 0x80u) {
        len--;
    }
    if (len > 0) {
        uint32_t words = (len + 1u + 7u) / 8u;
        for (uint32_t i = 0; i < words; i++) {
            uint64_t w = 0;
            for (uint32_t b = 0; b < 8u; b++) {
                uint32_t at = i * 8u + b;
                uint64_t byte = at < len ? (uint8_t)text[at] : 0u;
                w |= byte << (8u * b);
            }
            pto_ai_st_dev(ai, desc + FAULT_TEXT_AT + (uint64_t)i * 8u, w);
        }
    }
    pto_ai_store_barrier(ai);
    pto_ai_st_dev(ai, desc + FATAL_AT(complete), 1);
    return 1;
}

static void latch_at(struct pto_ai *ai, uint64_t desc, uint64_t code, uint64_t site, uint64_t task, uint32_t core,
                     uint64_t detail, const char *text)
{
    struct fault f;
    f.code = code;
    f.site = site;
    f.task = task;
    f.core = core;
    f.detail = detail;
    (void)latch(ai, desc, &f, text);
}

/* ---- The trace ring (runtime/src/trace.rs): device-direct stores only. ---- */

struct trace_ring {
    uint64_t at;
    uint32_t cap;
    uint32_t count;
    uint64_t dropped;
    uint64_t epoch;
    int open;
};

static uint64_t ring_bytes(uint32_t records)
{
    uint64_t b = sizeof(struct pto_trace_header) + (uint64_t)records * sizeof(struct pto_trace_record);
    return (b + 63u) & ~(uint64_t)63u;
}

static void trace_open(struct trace_ring *t, const struct pto_launch_config *cfg, uint32_t w)
{
    t->open = cfg->trace != 0 && w < cfg->workers;
    t->at = cfg->trace + (uint64_t)w * ring_bytes(cfg->trace_core_records);
    t->cap = cfg->trace_core_records;
    t->count = 0;
    t->dropped = 0;
    t->epoch = cfg->epoch;
}

static void trace_push(struct trace_ring *t, struct pto_ai *ai, const struct pto_trace_record *r)
{
    if (t->count >= t->cap) {
        t->dropped++;
        return;
    }
    uint64_t at = t->at + sizeof(struct pto_trace_header) + (uint64_t)t->count * sizeof(struct pto_trace_record);
    const uint8_t *bytes = (const uint8_t *)r;
    for (uint32_t i = 0; i < sizeof(struct pto_trace_record) / 8u; i++) {
        uint64_t w = 0;
        for (uint32_t b = 0; b < 8u; b++) {
            w |= (uint64_t)bytes[i * 8u + b] << (8u * b);
        }
        pto_ai_st_dev(ai, at + (uint64_t)i * 8u, w);
    }
    t->count++;
}

static void trace_close(const struct trace_ring *t, struct pto_ai *ai)
{
    pto_ai_st_dev(ai, t->at + offsetof(struct pto_trace_header, count), t->count);
    pto_ai_st_dev(ai, t->at + offsetof(struct pto_trace_header, dropped), t->dropped);
    pto_ai_store_barrier(ai);
    pto_ai_st_dev(ai, t->at, t->epoch);
}

/* ---- The handshake, the window and the gate (the AICore half of lifecycle.rs). ---- */

/* Publish this core's report: the fields with the marker cleared, published; then the marker
 * (this run's epoch) alone, published; then an event. */
static void report(struct pto_ai *ai, const struct run_map *m)
{
    uint32_t w = pto_ai_block_idx(ai);
    struct pto_handshake hs;
    zero(&hs, sizeof(hs));
    hs.aicore_done = w + 1u;
    hs.core_type = pto_ai_core_type(ai);
    hs.physical_core_id = pto_ai_physical_id(ai);
    uint64_t at = handshake_at(m, w);
    int publish = !broken(ai, PTO_BREAK_SKIP_REPORT_PUBLISH);
    pto_ai_store(ai, at, &hs, sizeof(hs));
    if (publish) {
        publish_line(ai, at);
    }
    /* Maintenance completion is not store ordering: the marker is ordered after the fields. */
    pto_ai_store_store(ai);
    uint64_t epoch = m->cfg.epoch;
    pto_ai_store(ai, at + REPORT_EPOCH_AT, &epoch, sizeof(epoch));
    if (publish) {
        publish_line(ai, at);
    }
    pto_ai_send_event(ai);
}

enum window { WINDOW_OPEN, WINDOW_CANCELLED, WINDOW_TIMEOUT, WINDOW_ABORTED };

/* Wait for the window to open (DMB non-zero), a pre-window cancel through the gate, or the
 * deadline. */
static enum window wait_window(struct pto_ai *ai, const struct run_map *m, uint64_t deadline)
{
    uint64_t gate = gate_at(m, pto_ai_block_idx(ai));
    struct backoff b;
    backoff_init(&b);
    for (;;) {
        if (pto_ai_aborted(ai)) {
            return WINDOW_ABORTED;
        }
        uint32_t v = pto_ai_read_dmb(ai);
        if (v != 0) {
            pto_ai_rmb(ai);
            return WINDOW_OPEN;
        }
        uint64_t g = pto_ai_ld_dev(ai, gate);
        if (g == cancel_value(m->cfg.epoch)) {
            return WINDOW_CANCELLED;
        }
        if (pto_ai_now(ai) >= deadline) {
            return WINDOW_TIMEOUT;
        }
        /* A DMB write wakes this core as well as a store to its gate. */
        backoff_wait_word(&b, ai, gate, g, deadline);
    }
}

enum release { RELEASED, ABANDONED, RELEASE_ABORTED };

/* After EXITED: wait until this run's AICPU released (or abandoned) the core through its gate.
 * No early exit: past the budget the core latches RELEASE_TIMEOUT once and keeps waiting. */
static enum release wait_release(struct pto_ai *ai, const struct run_map *m, uint64_t budget)
{
    uint32_t w = pto_ai_block_idx(ai);
    uint64_t gate = gate_at(m, w);
    uint64_t epoch = m->cfg.epoch;
    uint64_t deadline = saturating_add(pto_ai_now(ai), budget);
    int escalated = 0;
    struct backoff b;
    backoff_init(&b);
    for (;;) {
        if (pto_ai_aborted(ai)) {
            return RELEASE_ABORTED;
        }
        uint64_t v = pto_ai_ld_dev(ai, gate);
        if (v == epoch ||
            (v != 0 && (v & ((uint64_t)1 << 63)) == 0 && broken(ai, PTO_BREAK_GATE_ANY_EPOCH))) {
            pto_ai_store_barrier(ai);
            return RELEASED;
        }
        if (v == cancel_value(epoch)) {
            pto_ai_store_barrier(ai);
            return ABANDONED;
        }
        uint64_t now = pto_ai_now(ai);
        if (now >= deadline) {
            if (!escalated) {
                escalated = 1;
                latch_at(ai, m->desc, PTO_ERR_RELEASE_TIMEOUT, PTO_SITE_GATE, NO_ID, w, budget, "");
            }
            deadline = saturating_add(now, budget > 0 ? budget : 1);
        }
        backoff_wait_word(&b, ai, gate, v, deadline);
    }
}

/* ---- One dispatch (exec/legacy/core.rs `run_one`, exec/kernel_call.rs). ---- */

/* What a kernel is given: the argument record, read once. */
struct args {
    struct pto_tensor_desc tensors[PTO_MAX_TENSOR_ARGS];
    uint64_t scalars[PTO_MAX_SCALAR_ARGS];
    uint32_t nt;
    uint32_t ns;
};

static void load_args(struct pto_ai *ai, const struct pto_dispatch_payload *p, struct args *a)
{
    uint64_t at = p->args;
    struct pto_args_header h;
    int observe = !broken(ai, PTO_BREAK_SKIP_ARGS_OBSERVE);
    if (observe) {
        observe_lines(ai, at, sizeof(struct pto_args_header));
    }
    pto_ai_load(ai, at, &h, sizeof(h));
    a->nt = h.tensors < PTO_MAX_TENSOR_ARGS ? h.tensors : PTO_MAX_TENSOR_ARGS;
    a->ns = h.scalars < PTO_MAX_SCALAR_ARGS ? h.scalars : PTO_MAX_SCALAR_ARGS;
    uint64_t tb = (uint64_t)a->nt * sizeof(struct pto_tensor_desc);
    uint64_t body = at + sizeof(struct pto_args_header);
    if (observe) {
        observe_lines(ai, body, tb + (uint64_t)a->ns * 8u);
    }
    pto_ai_load(ai, body, a->tensors, (uint32_t)tb);
    pto_ai_load(ai, body + tb, a->scalars, a->ns * 8u);
}

/* [lo, hi): the bytes a view can touch; 0 when its span overflows. */
static int span(const struct pto_tensor_desc *t, uint64_t *lo, uint64_t *hi)
{
    uint64_t last = 0;
    uint32_t dims = t->ndims < PTO_MAX_TENSOR_DIMS ? t->ndims : PTO_MAX_TENSOR_DIMS;
    for (uint32_t k = 0; k < dims; k++) {
        uint64_t extent = t->shape[k] > 0 ? t->shape[k] : 1u;
        /* Both factors are below 2^32: the product fits. */
        uint64_t step = (extent - 1u) * (uint64_t)t->strides[k];
        if (last > UINT64_MAX - step) {
            return 0;
        }
        last += step;
    }
    if (last == UINT64_MAX || (t->elem_bytes != 0 && last + 1u > UINT64_MAX / t->elem_bytes)) {
        return 0;
    }
    uint64_t bytes = (last + 1u) * t->elem_bytes;
    if (t->addr > UINT64_MAX - bytes) {
        return 0;
    }
    *lo = t->addr;
    *hi = t->addr + bytes;
    return 1;
}

static const uint32_t DTYPE_SIZE[PTO_DTYPE_COUNT] = {
    PTO_DTYPE_SIZE_0, PTO_DTYPE_SIZE_1, PTO_DTYPE_SIZE_2, PTO_DTYPE_SIZE_3,  PTO_DTYPE_SIZE_4,  PTO_DTYPE_SIZE_5,
    PTO_DTYPE_SIZE_6, PTO_DTYPE_SIZE_7, PTO_DTYPE_SIZE_8, PTO_DTYPE_SIZE_9, PTO_DTYPE_SIZE_10, PTO_DTYPE_SIZE_11,
};

/* The first descriptor no kernel could have been given (a rank outside 1..=5, an unknown
 * element type or size, a span that overflows or exceeds 2^40 bytes), or -1. */
static int32_t malformed(const struct args *a)
{
    for (uint32_t i = 0; i < a->nt; i++) {
        const struct pto_tensor_desc *t = &a->tensors[i];
        int size_ok = t->dtype < PTO_DTYPE_COUNT && DTYPE_SIZE[t->dtype] == t->elem_bytes && t->elem_bytes != 0;
        uint64_t lo, hi;
        if (t->ndims < 1 || t->ndims > PTO_MAX_TENSOR_DIMS || !size_ok || !span(t, &lo, &hi) ||
            hi - lo >= ((uint64_t)1 << 40)) {
            return (int32_t)i;
        }
    }
    return -1;
}

/* Drop this core's copies of every argument's lines before the kernel runs. */
static void observe_arguments(struct pto_ai *ai, const struct args *a)
{
    for (uint32_t i = 0; i < a->nt; i++) {
        uint64_t lo, hi;
        if (span(&a->tensors[i], &lo, &hi)) {
            observe_lines(ai, lo, hi - lo);
        }
    }
}

/* Write back every line of every output, so it reaches memory before FIN. */
static void publish_outputs(struct pto_ai *ai, const struct args *a)
{
    for (uint32_t i = 0; i < a->nt; i++) {
        uint64_t lo, hi;
        if ((a->tensors[i].flags & PTO_TENSOR_WRITTEN) != 0 && span(&a->tensors[i], &lo, &hi)) {
            publish_lines(ai, lo, hi - lo);
        }
    }
}

/* Report the end of dispatch `id`: FIN, or COND_FAULTED when it faulted. */
static int finished(struct pto_ai *ai, uint32_t id, int faulted)
{
    /* Broken on purpose: a faulted dispatch reports a plain FIN. */
    faulted = faulted && !broken(ai, PTO_BREAK_RELEASE_ON_FAULT);
    pto_ai_store_barrier(ai);
    pto_ai_write_cond(ai, faulted ? PTO_COND_FAULTED : cond_fin(id));
    return faulted;
}

/* Run dispatch `id`; nonzero when it faulted (the fault latched, COND_FAULTED written). */
static int run_one(struct pto_ai *ai, const struct run_map *m, uint32_t id, struct trace_ring *trace)
{
    uint32_t w = pto_ai_block_idx(ai);
    uint64_t at = payload_at(m, w, id & 1u);
    if (!broken(ai, PTO_BREAK_SKIP_PAYLOAD_OBSERVE)) {
        observe_line(ai, at);
    }
    struct pto_dispatch_payload p;
    pto_ai_load(ai, at, &p, sizeof(p));
    pto_ai_write_cond(ai, cond_ack(id));
    uint64_t start = trace->open ? pto_ai_now(ai) : 0;
    int faulted = 0;
    if (p.reg_task_id != id) {
        faulted = 1;
        latch_at(ai, m->desc, PTO_ERR_BAD_IMAGE, PTO_SITE_KERNEL, p.task_id, w,
                 ((uint64_t)p.reg_task_id << 32) | id, "payload does not carry the dispatched id");
    } else if (!pto_ai_kernel_known(ai, p.bin)) {
        faulted = 1;
        latch_at(ai, m->desc, PTO_ERR_UNKNOWN_KERNEL, PTO_SITE_KERNEL, p.task_id, w, p.bin,
                 "kernel binary not loaded for this core type");
    } else {
        struct args a;
        load_args(ai, &p, &a);
        int32_t bad = malformed(&a);
        if (bad >= 0) {
            /* Nothing of a malformed record is touched: no invalidate over a garbage range,
             * no kernel on garbage views. */
            latch_at(ai, m->desc, PTO_ERR_BAD_IMAGE, PTO_SITE_KERNEL, p.task_id, w, (uint64_t)bad,
                     "malformed argument record (a stale or corrupt read of its tensor descriptors)");
            return finished(ai, id, 1);
        }
        observe_arguments(ai, &a);
        char text[PTO_FAULT_TEXT_BYTES];
        text[0] = 0;
        struct pto_ai_kernel_call call;
        call.bin = p.bin;
        call.payload = &p;
        call.tensors = a.tensors;
        call.tensor_count = a.nt;
        call.scalar_count = a.ns;
        call.scalars = a.scalars;
        call.fault_text = text;
        call.fault_text_cap = sizeof(text);
        call.reserved = 0;
        int r = pto_ai_run_kernel(ai, &call);
        if (r != PTO_AI_KERNEL_OK) {
            faulted = 1;
            text[sizeof(text) - 1] = 0;
            if (r == PTO_AI_KERNEL_UNKNOWN) {
                latch_at(ai, m->desc, PTO_ERR_UNKNOWN_KERNEL, PTO_SITE_KERNEL, p.task_id, w, p.bin,
                         "kernel binary not loaded for this core type");
            } else {
                latch_at(ai, m->desc, PTO_ERR_KERNEL_FAULT, PTO_SITE_KERNEL, p.task_id, w, p.bin, text);
            }
        }
        if (broken(ai, PTO_BREAK_FIN_BEFORE_PUBLISH) && !faulted) {
            pto_ai_write_cond(ai, cond_fin(id));
        }
        if (!(faulted && broken(ai, PTO_BREAK_FAULT_EXIT_SKIPS_PUBLISH))) {
            publish_outputs(ai, &a);
        }
    }
    if (trace->open) {
        struct pto_trace_record r;
        zero(&r, sizeof(r));
        r.kind = PTO_TRACE_SUBTASK;
        r.lane = (uint8_t)(pto_ai_core_type(ai) == PTO_AI_CORE_AIC ? 0u : 1u + (p.lane < 1u ? p.lane : 1u));
        r.core = w;
        r.task = p.task_id;
        r.block = p.block_idx;
        r.bin = p.bin;
        r.start = start;
        r.end = pto_ai_now(ai);
        trace_push(trace, ai, &r);
    }
    return finished(ai, id, faulted);
}

/* ---- The dispatch loop (exec/legacy/core.rs `dispatch_loop`). ---- */

/* Run every dispatch id DMB names until EXIT (0), or until the wait budget passes without a
 * dispatch (the fault latched; a negative status). */
static int32_t dispatch_loop(struct pto_ai *ai, const struct run_map *m, struct trace_ring *trace)
{
    uint64_t budget = m->cfg.core_wait_ticks;
    uint32_t last = PTO_DMB_IDLE;
    uint64_t deadline = saturating_add(pto_ai_now(ai), budget);
    /* After a faulted dispatch the core takes no other: only EXIT ends the wait. */
    int faulted = 0;
    for (;;) {
        if (pto_ai_aborted(ai)) {
            return -PTO_CORE_STATUS_NEG_IDLE_TIMEOUT;
        }
        uint32_t v = pto_ai_read_dmb(ai);
        if (v == PTO_DMB_EXIT) {
            return 0;
        }
        if (v == last || v == PTO_DMB_IDLE || v == 0 || faulted) {
            if (pto_ai_now(ai) >= deadline) {
                latch_at(ai, m->desc, PTO_ERR_SCHEDULER_TIMEOUT, PTO_SITE_CORE_IDLE, NO_ID, pto_ai_block_idx(ai), v,
                         "");
                return -PTO_CORE_STATUS_NEG_IDLE_TIMEOUT;
            }
            pto_ai_wait_event(ai, deadline);
            continue;
        }
        pto_ai_rmb(ai);
        last = v;
        faulted = run_one(ai, m, v, trace);
        deadline = saturating_add(pto_ai_now(ai), budget);
    }
}

/* ---- The entry (exec/entry.rs `aicore_entry`, legacy executor only). ---- */

int32_t pto_aicore_main(struct pto_ai *ai, uint64_t desc)
{
    struct run_map m;
    m.desc = desc;
    observe_lines(ai, desc, sizeof(struct pto_launch_config));
    pto_ai_load(ai, desc, &m.cfg, sizeof(m.cfg));
    uint32_t w = pto_ai_block_idx(ai);
    /* The legacy executor only: a resident launch is refused like an unknown mode. */
    int legacy = m.cfg.executor == PTO_EXECUTOR_LEGACY_GRAPH || m.cfg.executor == PTO_EXECUTOR_LEGACY_UNSUPPORTED_SHAPE;
    if (m.cfg.magic != PTO_DESC_MAGIC || m.cfg.version != PTO_LAYOUT_VERSION || w >= m.cfg.workers || !legacy) {
        return -PTO_CORE_STATUS_NEG_BAD_DESC;
    }
    struct trace_ring trace;
    trace_open(&trace, &m.cfg, w);
    report(ai, &m);

    uint64_t budget = m.cfg.core_wait_ticks;
    /* What the core served: 0 until EXIT, a negative status once it gave up (the fault
     * latched). Every outcome after the report leaves through the one exit path below, except
     * a window the AICPU cancelled before it opened. */
    int32_t served;
    switch (wait_window(ai, &m, saturating_add(pto_ai_now(ai), budget))) {
    case WINDOW_CANCELLED:
        return 0;
    case WINDOW_ABORTED:
        return -PTO_CORE_STATUS_NEG_WINDOW_TIMEOUT;
    case WINDOW_TIMEOUT:
        latch_at(ai, desc, PTO_ERR_SCHEDULER_TIMEOUT, PTO_SITE_WINDOW, NO_ID, w, 0, "");
        served = -PTO_CORE_STATUS_NEG_WINDOW_TIMEOUT;
        break;
    case WINDOW_OPEN:
    default:
        pto_ai_write_cond(ai, PTO_COND_IDLE);
        served = dispatch_loop(ai, &m, &trace);
        break;
    }
    if (served != 0 && broken(ai, PTO_BREAK_ERROR_EXIT_SKIPS_GATE)) {
        /* Broken on purpose: the old error exits, which returned before the gate. */
        return served;
    }
    /* The one exit path: the trace closed, every store ordered before EXITED, then the
     * teardown gate, whatever the core served. */
    if (trace.open) {
        trace_close(&trace, ai);
    }
    pto_ai_store_barrier(ai);
    pto_ai_write_cond(ai, PTO_COND_EXITED);
    enum release released = wait_release(ai, &m, budget);
    if (served != 0) {
        return served;
    }
    return released == RELEASED ? 0 : -PTO_CORE_STATUS_NEG_NOT_RELEASED;
}

#if defined(PTO_AICORE_CHIP)
/* The chip's entry: the AICore program the host launches by binary handle, with the launch
 * descriptor's GM address as its argument. The core's identity comes from the vendor's
 * registers; the core type from the compilation (the vendor compiles AIC and AIV separately). */
extern "C" __global__ __aicore__ void pto_native_aicore(__gm__ uint8_t *desc)
{
    struct pto_ai ai;
    ai.block_idx = (uint32_t)get_block_idx();
#if defined(__DAV_C220_CUBE__) || defined(PTO_AICORE_CHIP_AIC)
    ai.core_type = PTO_AI_CORE_AIC;
#else
    ai.core_type = PTO_AI_CORE_AIV;
#endif
    ai.physical_id = (uint32_t)get_coreid();
    ai.reserved = 0;
    (void)pto_aicore_main(&ai, (uint64_t)(uintptr_t)desc);
}
#endif
