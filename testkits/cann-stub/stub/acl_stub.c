/*
 * A recording stand-in for the AscendCL functions pto-rt's chip boards call (the vendor
 * runtime's libascendcl.so), for tests on a host without the vendor SDK or a device.
 *
 * This is a TEST DOUBLE. It plays the device as far as the host can tell:
 *   - device memory is host memory (aligned_alloc), range-checked on every copy and memset;
 *   - binaries are files (or bytes) whose contents must name the functions looked up in them;
 *   - streams and events are handles; work submitted to a stream is complete on submission
 *     (the stub executes no device program: a launch is recorded, nothing runs);
 *   - any call can be told to fail with a given aclError (acl_stub_fail).
 * Every call is appended to a log (one line per call: name, arguments, result) that the
 * tests read (acl_stub_log). Prototypes follow the public headers (acl/acl_rt.h and
 * acl/acl_base_rt.h of hicann/runtime; see platforms/aarch64/src/cann/ffi.rs for commits).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int aclError;

#define OK 0
#define ERR_PARAM_INVALID 107000   /* ACL_ERROR_RT_PARAM_INVALID */
#define ERR_FILE_OPEN 107009       /* ACL_ERROR_RT_FILE_OPEN */
#define ERR_INVALID_HANDLE 107017  /* ACL_ERROR_RT_INVALID_HANDLE */
#define ERR_KERNEL_LOOKUP 507027   /* ACL_ERROR_RT_KERNEL_LOOKUP */
#define ERR_MEMORY_ALLOC 207001    /* ACL_ERROR_RT_MEMORY_ALLOCATION */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the log ---------------------------------------------------------------------------- */

static char *log_buf;
static size_t log_len, log_cap;

static void logf_locked(const char *fmt, ...) {
    va_list ap;
    for (;;) {
        size_t room = log_cap - log_len;
        va_start(ap, fmt);
        int n = vsnprintf(log_buf ? log_buf + log_len : NULL, log_buf ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (log_buf && (size_t)n < room) {
            log_len += (size_t)n;
            return;
        }
        size_t cap = log_cap ? log_cap * 2 : 1 << 16;
        while (cap - log_len <= (size_t)n) cap *= 2;
        char *b = realloc(log_buf, cap);
        if (!b) abort();
        log_buf = b;
        log_cap = cap;
    }
}

/* ---- injected failures ------------------------------------------------------------------- */

#define MAX_FAILS 16
static struct {
    char name[64];
    int nth; /* fail the nth call from now (1 = the next one) */
    int code;
} fails[MAX_FAILS];
static int nfails;

/* The injected code for this call of `name`, or 0. */
static int injected(const char *name) {
    for (int i = 0; i < nfails; i++) {
        if (strcmp(fails[i].name, name) == 0 && fails[i].nth > 0) {
            if (--fails[i].nth == 0) return fails[i].code;
        }
    }
    return 0;
}

/* ---- handles ----------------------------------------------------------------------------- */

#define MAX_OBJ 4096
enum kind { FREE_SLOT, ALLOC, STREAM, EVENT, BINARY, FUNC };
static struct obj {
    enum kind kind;
    void *ptr;            /* ALLOC: the memory; others: the handle given out */
    size_t size;          /* ALLOC: bytes; BINARY: bytes of its image */
    unsigned char *bytes; /* BINARY: its image (to look names up in) */
    int cpu_mode;         /* BINARY: cpuKernelMode, -1 when not given */
    int id;               /* STREAM/EVENT/BINARY/FUNC: a number for the log */
    int parent;           /* FUNC: its binary's id; EVENT: the stream it was recorded on (-1) */
    char name[128];       /* FUNC: its name */
} objs[MAX_OBJ];
static int next_id[6];

static struct obj *find(enum kind k, const void *p) {
    if (!p) return NULL;
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == k && objs[i].ptr == p) return &objs[i];
    return NULL;
}

static struct obj *new_obj(enum kind k) {
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == FREE_SLOT) {
            memset(&objs[i], 0, sizeof objs[i]);
            objs[i].kind = k;
            objs[i].id = next_id[k]++;
            objs[i].parent = -1;
            objs[i].cpu_mode = -1;
            return &objs[i];
        }
    return NULL;
}

/* A fresh opaque handle (a small heap block: unique, never dereferenced by callers). */
static void *new_handle(void) { return malloc(16); }

/* The allocation holding [p, p + n), or NULL. */
static struct obj *range(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < MAX_OBJ; i++) {
        if (objs[i].kind != ALLOC) continue;
        uintptr_t b = (uintptr_t)objs[i].ptr;
        if (a >= b && n <= objs[i].size && a - b <= objs[i].size - n) return &objs[i];
    }
    return NULL;
}

static int contains_name(const struct obj *bin, const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > bin->size) return 0;
    for (size_t i = 0; i + n <= bin->size; i++)
        if (memcmp(bin->bytes + i, name, n) == 0 && (i + n == bin->size || bin->bytes[i + n] == 0)) return 1;
    return 0;
}

#define ENTER(name)                        \
    pthread_mutex_lock(&lock);             \
    aclError rc__ = injected(name);        \
    const char *fn__ = name
#define RETURN(code)                                              \
    do {                                                          \
        aclError r__ = (code);                                    \
        logf_locked(" -> %d\n", r__);                             \
        pthread_mutex_unlock(&lock);                              \
        return r__;                                               \
    } while (0)
/* An injected failure: log it and return the code, doing nothing. */
#define INJECTED()                            \
    do {                                      \
        if (rc__) {                           \
            logf_locked(" injected");         \
            RETURN(rc__);                     \
        }                                     \
    } while (0)

/* ---- the control interface of the tests -------------------------------------------------- */

/* Forget the log and the injected failures (live objects stay). */
void acl_stub_reset(void) {
    pthread_mutex_lock(&lock);
    log_len = 0;
    nfails = 0;
    pthread_mutex_unlock(&lock);
}

/* Make the `nth` call of `name` from now (1: the next) return `code`, doing nothing. */
void acl_stub_fail(const char *name, int nth, int code) {
    pthread_mutex_lock(&lock);
    if (nfails < MAX_FAILS) {
        snprintf(fails[nfails].name, sizeof fails[nfails].name, "%s", name);
        fails[nfails].nth = nth;
        fails[nfails].code = code;
        nfails++;
    }
    pthread_mutex_unlock(&lock);
}

/* A copy of the log so far (malloc'd, NUL-terminated; the caller frees it with free). */
char *acl_stub_log(void) {
    pthread_mutex_lock(&lock);
    char *c = malloc(log_len + 1);
    if (c) {
        if (log_len) memcpy(c, log_buf, log_len);
        c[log_len] = 0;
    }
    pthread_mutex_unlock(&lock);
    return c;
}

/* Live objects of the stub (allocations, streams, events, binaries) still held. */
int acl_stub_live(void) {
    pthread_mutex_lock(&lock);
    int n = 0;
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == ALLOC || objs[i].kind == STREAM || objs[i].kind == EVENT || objs[i].kind == BINARY) n++;
    pthread_mutex_unlock(&lock);
    return n;
}

void acl_stub_free(char *p) { free(p); }

/* ---- AscendCL ---------------------------------------------------------------------------- */

aclError aclInit(const char *configPath) {
    ENTER("aclInit");
    logf_locked("%s config=%s", fn__, configPath ? configPath : "null");
    INJECTED();
    RETURN(OK);
}

aclError aclrtSetDevice(int32_t deviceId) {
    ENTER("aclrtSetDevice");
    logf_locked("%s device=%d", fn__, deviceId);
    INJECTED();
    RETURN(deviceId == 0 ? OK : 107001 /* ACL_ERROR_RT_INVALID_DEVICEID */);
}

aclError aclrtResetDevice(int32_t deviceId) {
    ENTER("aclrtResetDevice");
    logf_locked("%s device=%d", fn__, deviceId);
    INJECTED();
    RETURN(OK);
}

aclError aclrtMalloc(void **devPtr, size_t size, int policy) {
    ENTER("aclrtMalloc");
    logf_locked("%s size=%zu policy=%d", fn__, size, policy);
    INJECTED();
    if (!devPtr || size == 0) RETURN(ERR_PARAM_INVALID);
    struct obj *o = new_obj(ALLOC);
    size_t rounded = (size + 4095) & ~(size_t)4095;
    void *p = o ? aligned_alloc(4096, rounded) : NULL;
    if (!p) {
        if (o) o->kind = FREE_SLOT;
        RETURN(ERR_MEMORY_ALLOC);
    }
    memset(p, 0xA5, rounded); /* fresh device memory is not zero */
    o->ptr = p;
    o->size = size;
    *devPtr = p;
    logf_locked(" ptr=%p", p);
    RETURN(OK);
}

aclError aclrtFree(void *devPtr) {
    ENTER("aclrtFree");
    logf_locked("%s ptr=%p", fn__, devPtr);
    INJECTED();
    struct obj *o = find(ALLOC, devPtr);
    if (!o) RETURN(ERR_PARAM_INVALID);
    free(o->ptr);
    o->kind = FREE_SLOT;
    RETURN(OK);
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, int kind) {
    ENTER("aclrtMemcpy");
    logf_locked("%s dst=%p destMax=%zu src=%p count=%zu kind=%d", fn__, dst, destMax, src, count, kind);
    INJECTED();
    if (count > destMax || !dst || !src) RETURN(ERR_PARAM_INVALID);
    if (kind == 1 /* H2D */ && !range(dst, count)) RETURN(ERR_PARAM_INVALID);
    if (kind == 2 /* D2H */ && !range(src, count)) RETURN(ERR_PARAM_INVALID);
    if (kind != 1 && kind != 2) RETURN(ERR_PARAM_INVALID);
    memcpy(dst, src, count);
    RETURN(OK);
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    ENTER("aclrtMemset");
    logf_locked("%s ptr=%p maxCount=%zu value=%d count=%zu", fn__, devPtr, maxCount, value, count);
    INJECTED();
    if (count > maxCount || !range(devPtr, count)) RETURN(ERR_PARAM_INVALID);
    memset(devPtr, value, count);
    RETURN(OK);
}

aclError aclrtCreateStream(void **stream) {
    ENTER("aclrtCreateStream");
    logf_locked("%s", fn__);
    INJECTED();
    struct obj *o = new_obj(STREAM);
    if (!o || !stream) RETURN(ERR_PARAM_INVALID);
    o->ptr = new_handle();
    *stream = o->ptr;
    logf_locked(" stream=%d", o->id);
    RETURN(OK);
}

aclError aclrtDestroyStream(void *stream) {
    ENTER("aclrtDestroyStream");
    struct obj *o = find(STREAM, stream);
    logf_locked("%s stream=%d", fn__, o ? o->id : -1);
    INJECTED();
    if (!o) RETURN(ERR_INVALID_HANDLE);
    free(o->ptr);
    o->kind = FREE_SLOT;
    RETURN(OK);
}

aclError aclrtSynchronizeStreamWithTimeout(void *stream, int32_t timeout) {
    ENTER("aclrtSynchronizeStreamWithTimeout");
    struct obj *o = find(STREAM, stream);
    logf_locked("%s stream=%d timeout=%d", fn__, o ? o->id : -1, timeout);
    INJECTED();
    RETURN(o ? OK : ERR_INVALID_HANDLE);
}

aclError aclrtCreateEvent(void **event) {
    ENTER("aclrtCreateEvent");
    logf_locked("%s", fn__);
    INJECTED();
    struct obj *o = new_obj(EVENT);
    if (!o || !event) RETURN(ERR_PARAM_INVALID);
    o->ptr = new_handle();
    *event = o->ptr;
    logf_locked(" event=%d", o->id);
    RETURN(OK);
}

aclError aclrtDestroyEvent(void *event) {
    ENTER("aclrtDestroyEvent");
    struct obj *o = find(EVENT, event);
    logf_locked("%s event=%d", fn__, o ? o->id : -1);
    INJECTED();
    if (!o) RETURN(ERR_INVALID_HANDLE);
    free(o->ptr);
    o->kind = FREE_SLOT;
    RETURN(OK);
}

aclError aclrtRecordEvent(void *event, void *stream) {
    ENTER("aclrtRecordEvent");
    struct obj *e = find(EVENT, event), *s = find(STREAM, stream);
    logf_locked("%s event=%d stream=%d", fn__, e ? e->id : -1, s ? s->id : -1);
    INJECTED();
    if (!e || !s) RETURN(ERR_INVALID_HANDLE);
    e->parent = s->id;
    RETURN(OK);
}

aclError aclrtQueryEventStatus(void *event, int *status) {
    ENTER("aclrtQueryEventStatus");
    struct obj *e = find(EVENT, event);
    logf_locked("%s event=%d", fn__, e ? e->id : -1);
    INJECTED();
    if (!e || !status) RETURN(ERR_INVALID_HANDLE);
    /* Work is complete on submission: a recorded event is complete. */
    *status = e->parent >= 0 ? 1 : 0;
    logf_locked(" status=%d", *status);
    RETURN(OK);
}

typedef struct {
    int type;
    int32_t value[4];
} LoadOption;
typedef struct {
    LoadOption *options;
    size_t numOpt;
} LoadOptions;

static aclError load_binary(const unsigned char *data, size_t len, const LoadOptions *options, void **binHandle) {
    struct obj *o = new_obj(BINARY);
    if (!o || !binHandle) return ERR_PARAM_INVALID;
    o->bytes = malloc(len ? len : 1);
    if (!o->bytes) {
        o->kind = FREE_SLOT;
        return ERR_MEMORY_ALLOC;
    }
    memcpy(o->bytes, data, len);
    o->size = len;
    if (options)
        for (size_t i = 0; i < options->numOpt; i++)
            if (options->options[i].type == 3 /* ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE */)
                o->cpu_mode = options->options[i].value[0];
    o->ptr = new_handle();
    *binHandle = o->ptr;
    logf_locked(" bin=%d bytes=%zu cpuKernelMode=%d", o->id, len, o->cpu_mode);
    return OK;
}

aclError aclrtBinaryLoadFromFile(const char *binPath, LoadOptions *options, void **binHandle) {
    ENTER("aclrtBinaryLoadFromFile");
    logf_locked("%s path=%s", fn__, binPath ? binPath : "null");
    INJECTED();
    FILE *f = binPath ? fopen(binPath, "rb") : NULL;
    if (!f) RETURN(ERR_FILE_OPEN);
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, n;
    unsigned char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n > cap) {
            cap = (len + n) * 2;
            unsigned char *b = realloc(buf, cap);
            if (!b) abort();
            buf = b;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    aclError r = load_binary(buf, len, options, binHandle);
    free(buf);
    RETURN(r);
}

aclError aclrtBinaryLoadFromData(const void *data, size_t length, const LoadOptions *options, void **binHandle) {
    ENTER("aclrtBinaryLoadFromData");
    logf_locked("%s length=%zu numOpt=%zu", fn__, length, options ? options->numOpt : 0);
    INJECTED();
    if (!data || length == 0) RETURN(ERR_PARAM_INVALID);
    RETURN(load_binary(data, length, options, binHandle));
}

aclError aclrtBinaryUnLoad(void *binHandle) {
    ENTER("aclrtBinaryUnLoad");
    struct obj *o = find(BINARY, binHandle);
    logf_locked("%s bin=%d", fn__, o ? o->id : -1);
    INJECTED();
    if (!o) RETURN(ERR_INVALID_HANDLE);
    for (int i = 0; i < MAX_OBJ; i++)
        if (objs[i].kind == FUNC && objs[i].parent == o->id) {
            free(objs[i].ptr);
            objs[i].kind = FREE_SLOT;
        }
    free(o->bytes);
    free(o->ptr);
    o->kind = FREE_SLOT;
    RETURN(OK);
}

static aclError new_func(struct obj *bin, const char *name, void **funcHandle) {
    struct obj *f = new_obj(FUNC);
    if (!f || !funcHandle) return ERR_PARAM_INVALID;
    f->ptr = new_handle();
    f->parent = bin->id;
    snprintf(f->name, sizeof f->name, "%s", name);
    *funcHandle = f->ptr;
    logf_locked(" func=%d", f->id);
    return OK;
}

aclError aclrtBinaryGetFunction(void *binHandle, const char *kernelName, void **funcHandle) {
    ENTER("aclrtBinaryGetFunction");
    struct obj *b = find(BINARY, binHandle);
    logf_locked("%s bin=%d name=%s", fn__, b ? b->id : -1, kernelName ? kernelName : "null");
    INJECTED();
    if (!b) RETURN(ERR_INVALID_HANDLE);
    if (!kernelName || b->cpu_mode >= 0 || !contains_name(b, kernelName)) RETURN(ERR_KERNEL_LOOKUP);
    RETURN(new_func(b, kernelName, funcHandle));
}

aclError aclrtRegisterCpuFunc(void *handle, const char *funcName, const char *kernelName, void **funcHandle) {
    ENTER("aclrtRegisterCpuFunc");
    struct obj *b = find(BINARY, handle);
    logf_locked("%s bin=%d funcName=%s kernelName=%s", fn__, b ? b->id : -1, funcName ? funcName : "null",
                kernelName ? kernelName : "null");
    INJECTED();
    if (!b) RETURN(ERR_INVALID_HANDLE);
    /* Only for AICPU binaries loaded from data in mode 2; otherwise ACL_ERROR_RT_PARAM_INVALID. */
    if (b->cpu_mode != 2 || !funcName || !kernelName) RETURN(ERR_PARAM_INVALID);
    if (!contains_name(b, funcName)) RETURN(ERR_KERNEL_LOOKUP);
    RETURN(new_func(b, funcName, funcHandle));
}

aclError aclrtGetFunctionAddr(void *funcHandle, void **aicAddr, void **aivAddr) {
    ENTER("aclrtGetFunctionAddr");
    struct obj *f = find(FUNC, funcHandle);
    logf_locked("%s func=%d", fn__, f ? f->id : -1);
    INJECTED();
    if (!f || !aicAddr || !aivAddr) RETURN(ERR_INVALID_HANDLE);
    /* Device entry addresses as the stub's device numbers them: distinct per function. */
    *aicAddr = (void *)(uintptr_t)(0x10000000u + 0x1000u * (unsigned)f->id);
    *aivAddr = (void *)(uintptr_t)(0x20000000u + 0x1000u * (unsigned)f->id);
    logf_locked(" aic=%p aiv=%p", *aicAddr, *aivAddr);
    RETURN(OK);
}

aclError aclrtLaunchKernelWithHostArgs(void *funcHandle, uint32_t blockDim, void *stream, void *cfg, void *hostArgs,
                                       size_t argsSize, void *placeHolderArray, size_t placeHolderNum) {
    ENTER("aclrtLaunchKernelWithHostArgs");
    struct obj *f = find(FUNC, funcHandle), *s = find(STREAM, stream);
    logf_locked("%s func=%s blockDim=%u stream=%d cfg=%s placeHolders=%zu args=", fn__, f ? f->name : "?", blockDim,
                s ? s->id : -1, cfg ? "set" : "null", placeHolderNum);
    for (size_t i = 0; hostArgs && i < argsSize; i++) logf_locked("%02x", ((unsigned char *)hostArgs)[i]);
    INJECTED();
    if (!f || !s) RETURN(ERR_INVALID_HANDLE);
    if (blockDim == 0 || !hostArgs || argsSize == 0 || (placeHolderNum && !placeHolderArray)) RETURN(ERR_PARAM_INVALID);
    /* Recorded; nothing runs. */
    RETURN(OK);
}
