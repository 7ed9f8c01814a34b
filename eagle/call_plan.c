/* A prepared run's call plan, launched in one call: what the bridges run (eagle/prepared.py).
 *
 * eagle prepares, per kernel and per shape, every stage of a run (buffers, chunk argument blocks: the native
 * executor's `eagle_stage`s) and a `call_plan` saying where each operand and result goes: the descriptor slots
 * (pointer, aligned pointer) of the stage buffers that stand for it. A call patches the arrays' addresses into
 * those slots, fires the stages in order through the executor (resets, chunks on the pool, finish) and turns a
 * refusal (a key outside a sink, found as the compiled code runs) into eagle's own message.
 *
 * Two doors: `eagle_call_run` (eagle.torch, through ctypes: one call per launch) and `eagle_jax_call`, an XLA FFI
 * handler (eagle.jax: the plan's address travels as the custom call's `plan` attribute; no Python on the call path
 * inside jit). Built by eagle/prepared.py with the system C compiler, against the XLA FFI C API headers jaxlib
 * ships when jax is installed (else with EAGLE_NO_XLA: the handler left out).
 *
 * `eagle_jax_repeats` is the JAX backward's check of an output written by key: it passes a cotangent through
 * unchanged, or refuses when the winners kernel counted more than one store at some position (eagle/jax.py).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifndef EAGLE_NO_XLA
#include "xla/ffi/api/c_api.h"
#endif

typedef int (*eagle_fire_fn)(const void *stage);

typedef struct {
    const void *stage;     /* the executor's eagle_stage */
    const int64_t *err;    /* its #err buffer: (count, first bad key, sink buffer index) per chunk */
    int64_t nchunks;
    const char *const *messages; /* per buffer index: a printf format (count, key) for a sink, else NULL */
} call_stage;

typedef struct {
    eagle_fire_fn fire;
    int64_t nstages;
    const call_stage *stages;
    int64_t nargs, nrets;
    const int64_t *first;  /* patches of operand i (args, then rets): slots[first[i] .. first[i + 1]) */
    int64_t *const *slots; /* each: &vals[5 * buffer] of a stage (pointer and aligned pointer) */
    const char *kernel;
    pthread_mutex_t mu;    /* one call at a time uses the plan's buffers (last: its size is the C library's) */
} call_plan;

static void patch(const call_plan *p, int64_t i, void *data) {
    for (int64_t k = p->first[i]; k < p->first[i + 1]; k++) {
        int64_t *slot = p->slots[k];
        slot[0] = slot[1] = (int64_t)(uintptr_t)data;
    }
}

static void refusal(const call_plan *p, const call_stage *st, char *out, size_t n) {
    int64_t count = 0, key = 0, sink = -1;
    for (int64_t c = 0; c < st->nchunks; c++) {
        const int64_t *e = st->err + 3 * c;
        if (e[0] && sink < 0) {
            key = e[1];
            sink = e[2];
        }
        count += e[0];
    }
    const char *fmt = sink >= 0 ? st->messages[sink] : NULL;
    if (fmt != NULL)
        snprintf(out, n, fmt, (long long)count, (long long)key);
    else
        snprintf(out, n, "kernel '%s': %lld lane(s) scattered to a key outside a sink", p->kernel, (long long)count);
}

/* Patch every operand and result address (ptrs: operands, then results) and fire the stages in order: 0 when
 * every stage ran, else 1 with eagle's refusal message in msg. */
int eagle_call_run(const call_plan *p, void *const *ptrs, char *msg, int64_t n) {
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
    for (int64_t i = 0; i < p->nargs + p->nrets; i++)
        patch(p, i, ptrs[i]);
    for (int64_t s = 0; s < p->nstages; s++) {
        if (p->fire(p->stages[s].stage)) {
            refusal(p, &p->stages[s], msg, (size_t)n);
            pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
            return 1;
        }
    }
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
    return 0;
}

#ifndef EAGLE_NO_XLA
static XLA_FFI_Error *fail(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *msg) {
    XLA_FFI_Error_Create_Args a;
    memset(&a, 0, sizeof a);
    a.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    a.message = msg;
    a.errc = code;
    return api->XLA_FFI_Error_Create(&a);
}

static const call_plan *plan_of(XLA_FFI_CallFrame *cf) {
    for (int64_t i = 0; i < cf->attrs.size; i++) {
        XLA_FFI_ByteSpan *name = cf->attrs.names[i];
        if (cf->attrs.types[i] == XLA_FFI_AttrType_SCALAR && name->len == 4 && memcmp(name->ptr, "plan", 4) == 0) {
            XLA_FFI_Scalar *s = (XLA_FFI_Scalar *)cf->attrs.attrs[i];
            if (s->dtype == XLA_FFI_DataType_S64 || s->dtype == XLA_FFI_DataType_U64)
                return (const call_plan *)(uintptr_t)(*(const int64_t *)s->value);
        }
    }
    return NULL;
}

/* 1 when the call has nothing to run: XLA asks which API version the handler speaks (answered here), or calls it
 * at a stage other than execution. */
static int idle(XLA_FFI_CallFrame *cf) {
    XLA_FFI_Extension_Base *ext = cf->extension_start;
    if (ext != NULL && ext->type == XLA_FFI_Extension_Metadata) {
        XLA_FFI_Metadata *m = ((XLA_FFI_Metadata_Extension *)ext)->metadata;
        m->api_version.major_version = XLA_FFI_API_MAJOR;
        m->api_version.minor_version = XLA_FFI_API_MINOR;
        m->traits = 0;
        return 1;
    }
    return cf->stage != XLA_FFI_ExecutionStage_EXECUTE;
}

XLA_FFI_Error *eagle_jax_call(XLA_FFI_CallFrame *cf) {
    if (idle(cf))
        return NULL;
    const call_plan *p = plan_of(cf);
    if (p == NULL)
        return fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "eagle.jax: the call carries no eagle plan");
    if (cf->args.size != p->nargs || cf->rets.size != p->nrets)
        return fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "eagle.jax: operand count differs from the plan");
    void *ptrs[256];
    if (p->nargs + p->nrets > 256)
        return fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "eagle.jax: more than 256 operands and results");
    for (int64_t i = 0; i < p->nargs; i++)
        ptrs[i] = ((XLA_FFI_Buffer *)cf->args.args[i])->data;
    for (int64_t j = 0; j < p->nrets; j++)
        ptrs[p->nargs + j] = ((XLA_FFI_Buffer *)cf->rets.rets[j])->data;
    char msg[512];
    if (eagle_call_run(p, ptrs, msg, sizeof msg))
        return fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    return NULL;
}

/* Operands: the stores counted per position (float32 or float64) and a cotangent; result: that cotangent (aliased).
 * The `plan` attribute is the address of a printf format (positions stored more than once, the first of them, its
 * count): the refusal's words, eagle/reverse.py's. */
XLA_FFI_Error *eagle_jax_repeats(XLA_FFI_CallFrame *cf) {
    if (idle(cf))
        return NULL;
    const char *fmt = (const char *)plan_of(cf);
    if (fmt == NULL || cf->args.size != 2 || cf->rets.size != 1)
        return fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "eagle.jax: a malformed check of repeated positions");
    XLA_FFI_Buffer *counts = (XLA_FFI_Buffer *)cf->args.args[0], *ct = (XLA_FFI_Buffer *)cf->args.args[1];
    XLA_FFI_Buffer *out = (XLA_FFI_Buffer *)cf->rets.rets[0];
    int64_t n = 1, m = 1;
    for (int64_t d = 0; d < counts->rank; d++)
        n *= counts->dims[d];
    for (int64_t d = 0; d < ct->rank; d++)
        m *= ct->dims[d];
    int wide = counts->dtype == XLA_FFI_DataType_F64;
    int64_t over = 0, first = -1;
    double most = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double c = wide ? ((const double *)counts->data)[i] : (double)((const float *)counts->data)[i];
        if (c > 1.0) {
            if (first < 0) {
                first = i;
                most = c;
            }
            over++;
        }
    }
    if (over) {
        char msg[768];
        snprintf(msg, sizeof msg, fmt, (long)over, (long)first, (long)most); /* (the format's %ld: Python's too) */
        return fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    }
    if (out->data != ct->data)
        memcpy(out->data, ct->data, (size_t)m * (ct->dtype == XLA_FFI_DataType_F64 ? 8 : 4));
    return NULL;
}
#endif

/* The plan struct's size and the mutex set-up, for the Python side that fills the struct. */
int64_t eagle_call_plan_size(void) { return (int64_t)sizeof(call_plan); }
int64_t eagle_call_stage_size(void) { return (int64_t)sizeof(call_stage); }
int eagle_call_plan_init(call_plan *p) { return pthread_mutex_init(&p->mu, NULL); }
