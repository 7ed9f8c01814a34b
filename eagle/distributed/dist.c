/* eagle.distributed's native side (eagle/distributed/stages.py, jax_shard.py).
 *
 * `eagle_dist_skip`: a no-op stage function: the finish of a "lanes only" launch and the lanes of a "finish only"
 * one, so that a stage split in two still runs through the native executor unchanged.
 *
 * `eagle_dist_lanes`: an XLA FFI handler firing a lanes half on one shard. Operand 0 is the shard's geometry
 * (int64): one element shift per further operand and per result, then every chunk's meta ([start, stop, chunk,
 * L, extents...]). A shard that runs with the whole grid's lane numbers (halos, global coordinates) reads lane g
 * of a plane at the plane's (aligned) address + g elements, so the aligned pointer patched into the stage is the
 * buffer's own minus its shift (the lanes only ever touch the shard's lanes and its halo rows, which the buffer
 * holds); the allocated pointer stays the buffer's own, which is what the executor's resets write through. A key
 * outside a sink does not fail this call: the chunks' #err triples are results like the rest of the partial state,
 * gathered across shards and looked at by `eagle_dist_check` on every shard before the finish, so every shard
 * refuses alike (one failing alone would leave the others waiting in a collective).
 *
 * `eagle_dist_check`: an XLA FFI handler taking the gathered #err triples (count, first bad key, buffer index per
 * chunk, shards in order) and handing them on to the finish, or failing with eagle's refusal (the message of
 * Plan.run, from the sink's printf format) when any chunk of any shard refused.
 *
 * `eagle_dist_fold` (and `eagle_dist_fold_run`, its ctypes form): one shard's private copies of a large sink folded
 * into one copy before they cross the shards, with the compiled finish's own steps (hawk/passes/lower/finish.py):
 * a plain sink's copies added in chunk order, a compensated one's by Neumaier steps, an ordered one's (high, low)
 * pairs by TwoSums into one pair per slot, which holds the exact sum of the slot's terms unless a TwoSum erred
 * (counted: the caller then moves the copies whole, so no slot's terms are ever rounded before the finish).
 *
 * Built with the system C compiler against jaxlib's XLA FFI headers (EAGLE_NO_XLA: the XLA handlers left out).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void eagle_dist_skip(void **args) { (void)args; }

typedef int (*eagle_fire_fn)(const void *stage);

typedef struct {
    eagle_fire_fn fire;
    const void *stage;      /* the executor's eagle_stage */
    int64_t nargs, nrets;   /* operands after the geometry, results */
    const int64_t *first;   /* patches of operand i (then result j): slots[first[i] .. first[i + 1]) */
    int64_t *const *slots;  /* each: &vals[5 * buffer] of the stage (pointer, aligned pointer) */
    const int64_t *elem;    /* bytes per element of operand i (then result j) */
    int64_t nmetas, meta_len;
    int64_t *const *metas;  /* each chunk's meta array */
    pthread_mutex_t mu;     /* one call at a time uses the stage's buffers */
} dist_plan;

int64_t eagle_dist_plan_size(void) { return (int64_t)sizeof(dist_plan); }
int eagle_dist_plan_init(dist_plan *p) { return pthread_mutex_init(&p->mu, NULL); }

/* Patch (shifted) addresses and metas, fire. ptrs: operands then results. A refusal stays in the #err result. */
void eagle_dist_run(dist_plan *p, const int64_t *geo, void *const *ptrs) {
    pthread_mutex_lock(&p->mu);
    for (int64_t i = 0; i < p->nargs + p->nrets; i++) {
        int64_t base = (int64_t)(intptr_t)ptrs[i];
        for (int64_t k = p->first[i]; k < p->first[i + 1]; k++) {
            p->slots[k][0] = base;                        /* the allocation: what the executor resets */
            p->slots[k][1] = base - geo[i] * p->elem[i];  /* the aligned pointer the compiled code indexes */
        }
    }
    const int64_t *m = geo + p->nargs + p->nrets;
    for (int64_t c = 0; c < p->nmetas; c++)
        memcpy(p->metas[c], m + c * p->meta_len, (size_t)(p->meta_len * 8));
    (void)p->fire(p->stage); /* (its return says whether #err holds a refusal: the check's business) */
    pthread_mutex_unlock(&p->mu);
}

typedef struct {
    const char *kernel;
    const char *const *messages; /* per buffer index of the stage: a printf format (count, key) for a sink, or NULL */
    int64_t nbuffers;
} dist_check;

/* 0 when no chunk of `err` (n triples) refused, else 1 with the refusal in msg: the first refusing chunk's key and
 * buffer, every chunk's count. */
int eagle_dist_refusal(const dist_check *p, const int64_t *err, int64_t n, char *msg, int64_t size) {
    int64_t count = 0, key = 0, buf = -1;
    for (int64_t c = 0; c < n; c++) {
        if (err[3 * c] && buf < 0) {
            key = err[3 * c + 1];
            buf = err[3 * c + 2];
        }
        count += err[3 * c];
    }
    if (count == 0)
        return 0;
    const char *fmt = buf >= 0 && buf < p->nbuffers ? p->messages[buf] : NULL;
    if (fmt != NULL)
        snprintf(msg, (size_t)size, fmt, (long long)count, (long long)key);
    else
        snprintf(msg, (size_t)size, "kernel '%s': %lld lane(s) stored or scattered to a key outside their array "
                 "(first bad key: %lld)", p->kernel, (long long)count, (long long)key);
    return 1;
}

/* What a fold takes: the copies' kind (0/1: plain float64/float32; 2: compensated, float64 (sum, correction)
 * pairs side by side; 3/4: the float64 (high, low) pairs of an ordered float64/float32 sink), the copies and the sink's
 * slots. */
typedef struct {
    int64_t kind, copies, slots;
} dist_fold;

#define TWO_SUM(T, a, b, s, err)                                                                                     \
    do {                                                                                                             \
        T s_ = (a) + (b), bb_ = s_ - (a);                                                                            \
        (err) = ((a) - (s_ - bb_)) + ((b) - bb_);                                                                     \
        (s) = s_;                                                                                                    \
    } while (0)

/* (hi, lo) += x by two TwoSums (finish.py's _pair_add): returns 0 when the second one erred (or a sum is inf/NaN). */
#define PAIR_ADD(T, hi, lo, x, ok)                                                                                   \
    do {                                                                                                             \
        T e1_, e2_;                                                                                                  \
        TWO_SUM(T, hi, x, hi, e1_);                                                                                  \
        TWO_SUM(T, lo, e1_, lo, e2_);                                                                                \
        (ok) &= (e2_ == (T)0);                                                                                       \
    } while (0)

/* A float32 sink's folded pair must stay below `limit` = 2**127 (the finish may hand its values to the float32
 * accumulator as float32 parts: hawk/passes/lower/scatters.py pair_fits_f32); past it the slot counts as erred. */
#define FOLD_PAIRS(T, limit)                                                                                         \
    do {                                                                                                             \
        const T *in_ = (const T *)in;                                                                                \
        T *out_ = (T *)out;                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                                            \
            T hi = 0, lo = 0;                                                                                        \
            int ok = 1;                                                                                              \
            for (int64_t c = 0; c < p->copies; c++) {                                                                \
                PAIR_ADD(T, hi, lo, in_[2 * (c * n + i)], ok);                                                       \
                PAIR_ADD(T, hi, lo, in_[2 * (c * n + i) + 1], ok);                                                   \
            }                                                                                                        \
            out_[2 * i] = hi;                                                                                        \
            out_[2 * i + 1] = lo;                                                                                    \
            bad += !ok || !(fabs(hi) < (limit));                                                                     \
        }                                                                                                            \
    } while (0)

#define FOLD_PLAIN(T)                                                                                                \
    do {                                                                                                             \
        const T *in_ = (const T *)in;                                                                                \
        T *out_ = (T *)out;                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                                            \
            T s_ = -0.0; /* (IEEE addition's identity: copies of -0.0 fold to -0.0) */                              \
            for (int64_t c = 0; c < p->copies; c++)                                                                  \
                s_ += in_[c * n + i];                                                                                \
            out_[i] = s_;                                                                                            \
        }                                                                                                            \
    } while (0)

/* Fold `in` (the copies) into `out` (one copy); the slots whose pair erred (ordered kinds; 0 for the others). */
int64_t eagle_dist_fold_run(const dist_fold *p, const void *in, void *out) {
    int64_t n = p->slots, bad = 0;
    switch (p->kind) {
    case 0: FOLD_PLAIN(double); break;
    case 1: FOLD_PLAIN(float); break;
    case 2: {
        const double *in_ = (const double *)in;
        double *out_ = (double *)out;
        for (int64_t i = 0; i < n; i++) {
            double s = -0.0, comp = -0.0; /* (from -0.0, as the launcher's copies start) */
            for (int64_t c = 0; c < p->copies; c++) { /* host_emit.neumaier, then the copy's own correction */
                double x = in_[c * 2 * n + 2 * i], t = s + x; /* ((sum, correction) pairs side by side) */
                double lost = fabs(s) >= fabs(x) ? (s - t) + x : (x - t) + s;
                if (fabs(t) < INFINITY)
                    comp += lost;
                s = t;
                comp += in_[c * 2 * n + 2 * i + 1];
            }
            out_[2 * i] = s;
            out_[2 * i + 1] = comp;
        }
        break;
    }
    case 3: FOLD_PAIRS(double, INFINITY); break;
    case 4: FOLD_PAIRS(double, 0x1p127); break;
    default: return -1;
    }
    return bad;
}

#ifndef EAGLE_NO_XLA
#include "xla/ffi/api/c_api.h"

static XLA_FFI_Error *fail(const XLA_FFI_Api *api, const char *msg) {
    XLA_FFI_Error_Create_Args a;
    memset(&a, 0, sizeof a);
    a.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    a.message = msg;
    a.errc = XLA_FFI_Error_Code_INVALID_ARGUMENT;
    return api->XLA_FFI_Error_Create(&a);
}

/* 1 when this call has nothing to run: XLA asks which API version the handler speaks (answered here), or calls
 * it at a stage other than execution. */
static int idle(XLA_FFI_CallFrame *cf) {
    XLA_FFI_Extension_Base *ext = cf->extension_start;
    if (ext != NULL && ext->type == XLA_FFI_Extension_Metadata) {
        XLA_FFI_Metadata *md = ((XLA_FFI_Metadata_Extension *)ext)->metadata;
        md->api_version.major_version = XLA_FFI_API_MAJOR;
        md->api_version.minor_version = XLA_FFI_API_MINOR;
        md->traits = 0;
        return 1;
    }
    return cf->stage != XLA_FFI_ExecutionStage_EXECUTE;
}

/* The call's `plan` attribute (an address), or NULL. */
static void *plan_of(XLA_FFI_CallFrame *cf) {
    for (int64_t i = 0; i < cf->attrs.size; i++) {
        XLA_FFI_ByteSpan *name = cf->attrs.names[i];
        if (cf->attrs.types[i] == XLA_FFI_AttrType_SCALAR && name->len == 4 && memcmp(name->ptr, "plan", 4) == 0)
            return (void *)(uintptr_t)(*(const int64_t *)((XLA_FFI_Scalar *)cf->attrs.attrs[i])->value);
    }
    return NULL;
}

XLA_FFI_Error *eagle_dist_lanes(XLA_FFI_CallFrame *cf) {
    if (idle(cf))
        return NULL;
    dist_plan *p = (dist_plan *)plan_of(cf);
    if (p == NULL)
        return fail(cf->api, "eagle.distributed: the call carries no plan");
    if (cf->args.size != p->nargs + 1 || cf->rets.size != p->nrets || p->nargs + p->nrets > 256)
        return fail(cf->api, "eagle.distributed: operand count differs from the plan");
    void *ptrs[256];
    for (int64_t i = 0; i < p->nargs; i++)
        ptrs[i] = ((XLA_FFI_Buffer *)cf->args.args[i + 1])->data;
    for (int64_t j = 0; j < p->nrets; j++)
        ptrs[p->nargs + j] = ((XLA_FFI_Buffer *)cf->rets.rets[j])->data;
    eagle_dist_run(p, (const int64_t *)((XLA_FFI_Buffer *)cf->args.args[0])->data, ptrs);
    return NULL;
}

XLA_FFI_Error *eagle_dist_check(XLA_FFI_CallFrame *cf) {
    if (idle(cf))
        return NULL;
    const dist_check *p = (const dist_check *)plan_of(cf);
    if (p == NULL)
        return fail(cf->api, "eagle.distributed: the check carries no plan");
    if (cf->args.size != 1 || cf->rets.size != 1)
        return fail(cf->api, "eagle.distributed: the check takes one operand and one result");
    XLA_FFI_Buffer *in = (XLA_FFI_Buffer *)cf->args.args[0], *out = (XLA_FFI_Buffer *)cf->rets.rets[0];
    int64_t n = 1;
    for (int64_t d = 0; d < in->rank; d++)
        n *= in->dims[d];
    char msg[512];
    if (eagle_dist_refusal(p, (const int64_t *)in->data, n / 3, msg, sizeof msg))
        return fail(cf->api, msg);
    if (out->data != in->data)
        memcpy(out->data, in->data, (size_t)n * 8);
    return NULL;
}
/* Operand: one shard's copies; results: the folded copy, and the count of slots whose pair erred (int64[1]). */
XLA_FFI_Error *eagle_dist_fold(XLA_FFI_CallFrame *cf) {
    if (idle(cf))
        return NULL;
    const dist_fold *p = (const dist_fold *)plan_of(cf);
    if (p == NULL)
        return fail(cf->api, "eagle.distributed: the fold carries no plan");
    if (cf->args.size != 1 || cf->rets.size != 2)
        return fail(cf->api, "eagle.distributed: the fold takes one operand and two results");
    int64_t bad = eagle_dist_fold_run(p, ((XLA_FFI_Buffer *)cf->args.args[0])->data,
                                      ((XLA_FFI_Buffer *)cf->rets.rets[0])->data);
    if (bad < 0)
        return fail(cf->api, "eagle.distributed: a fold of an unknown kind");
    *(int64_t *)((XLA_FFI_Buffer *)cf->rets.rets[1])->data = bad;
    return NULL;
}
#endif
