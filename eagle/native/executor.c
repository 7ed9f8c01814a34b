/* eagle's native stage executor: one call runs a host stage launch from start to end.
 *
 * eagle_fire(stage) copies the caller's arrays into their scratch copies (staged stages), resets what starts fresh
 * at every launch (per-chunk copies: each chunk its own part, just before its lanes), runs the compiled lanes
 * function on every chunk's packed arguments (the calling thread and a persistent pool of pthreads claim chunks
 * by atomic compare-and-swap), waits for the last chunk, folds a large sink's per-chunk copies (or an ordered sink's
 * per-chunk (high, low) pairs) into it by ranges of slots on the same threads (eagle/native/folds.py: the finish's
 * own steps, in chunk order), runs the finish and says whether the #err buffer holds anything. Which thread runs
 * which chunk never changes a result: every chunk writes partials of its own, combined by the finish in chunk order.
 *
 * The pool is created on first use and grows when a launch asks for more threads than it has; it is never
 * shrunk. Launches from several caller threads at once do not wait for each other: one that finds the pool busy
 * runs its chunks alone. Each thread takes the chunks of its own contiguous range first (the same ones launch after
 * launch, so their data stay in its core's cache), then what is left of the others'. Workers poll for about
 * 50 us after a launch (the next one often follows at once), then sleep on a condition variable, so an idle pool
 * costs nothing. The caller waits only for chunks a worker has claimed: on a loaded machine a worker that wakes
 * late finds every chunk taken and the launch already over.
 * For tests, `eagle_set_dealt(1)` deals each phase's tasks out instead: task k to participant k mod P (the caller
 * and its P - 1 helpers), each running its own share, so every helper really takes part (the caller waits for the
 * late ones). Off by default: which thread runs a task never changes a result, only who waits for whom.
 *
 * No headers of eagle's own and no Python: built by eagle/native/__init__.py with the system C compiler.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* The floating-point mode compiled code runs in: IEEE subnormals and round to nearest, whatever the caller's
 * thread was set to. XLA's CPU threads flush subnormals to zero (MXCSR's FTZ and DAZ bits), as does a process
 * that called torch.set_flush_denormal(True); under them x * 1.0 of a subnormal x gave 0 inside jax.jit, and the
 * exact sums' error-free steps would lose their low parts. fp_ieee() sets the mode and returns the caller's,
 * which fp_restore() puts back. Workers set it once, when they start. */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
typedef unsigned int fp_mode;
#define FP_NOT_IEEE 0xE040u /* MXCSR: flush to zero (bit 15), rounding control (13-14), denormals are zero (6) */
static fp_mode fp_ieee(void) {
    fp_mode old = _mm_getcsr();
    if (old & FP_NOT_IEEE)
        _mm_setcsr(old & ~FP_NOT_IEEE);
    return old;
}
static void fp_restore(fp_mode old) {
    if (old & FP_NOT_IEEE)
        _mm_setcsr(old);
}
#elif defined(__aarch64__)
typedef uint64_t fp_mode;
#define FP_NOT_IEEE ((1ull << 24) | (3ull << 22)) /* FPCR: flush to zero (FZ), rounding mode (RMode) */
static fp_mode fp_ieee(void) {
    fp_mode old;
    __asm__ volatile("mrs %0, fpcr" : "=r"(old));
    if (old & FP_NOT_IEEE) {
        fp_mode v = old & ~FP_NOT_IEEE;
        __asm__ volatile("msr fpcr, %0" : : "r"(v));
    }
    return old;
}
static void fp_restore(fp_mode old) {
    if (old & FP_NOT_IEEE)
        __asm__ volatile("msr fpcr, %0" : : "r"(old));
}
#else
typedef int fp_mode;
static fp_mode fp_ieee(void) { return 0; }
static void fp_restore(fp_mode old) { (void)old; }
#endif

typedef void (*eagle_fn)(void **);

typedef struct { /* one buffer that starts fresh at every launch */
    int64_t buf;   /* its index in the layout: its pointer is vals[5 * buf], its element count vals[5 * buf + 3] */
    int64_t kind;  /* 0: zero bytes, 1: fill float64 values, 2: fill float32 values */
    int64_t bytes; /* element size in bytes */
    double value;  /* the fill of kinds 1 and 2 */
    int64_t split; /* 1: a copy per chunk, chunk-major: each chunk resets its own part just before its lanes */
    int64_t clean; /* the buffer's address when the last launch's fold left it holding its fill everywhere (the
                    * fold of a large sink's copies refills each value it reads: fold_range), so this launch
                    * skips its reset; 0 otherwise (set by the fold, cleared by every launch before its lanes) */
} eagle_reset;

typedef struct { /* a staged array: its scratch copy (buffer `buf`) starts from what the caller's array holds */
    int64_t buf;
    const void *src;
    int64_t bytes;
} eagle_copy;

typedef struct { /* a large sink's per-chunk copies, folded into it in chunk order by ranges of slots in parallel
                  * (the finish's own fold then finds no copies: their size is 0 while it runs) */
    int64_t priv;   /* the copies: chunk after chunk, `slots` values each (kind 2: `slots` (sum, correction) pairs,
                     * side by side (Layout.pairs_side_by_side); kinds 3, 4: `slots` (high, low) pairs) */
    int64_t target; /* the sink (kinds 0, 1, 3, 4), or its companion (kind 2: `slots` (sum, correction) pairs) */
    int64_t kind;   /* 0: float64 adds, 1: float32 adds, 2: Neumaier steps on float64 (sum, correction) pairs,
                     * 3, 4: an ordered float64 / float32 sink's float64 (high, low) pairs (pairs_range),
                     * 5, 6: a slot-range stage's compensated companion (`priv`: `slots` (sum, correction)
                     * pairs) into its float64 / float32 sink (companion_range; no copies) */
    int64_t slots;
    int64_t exact;  /* kinds 3, 4: the sink's exact accumulators (their last word counts the terms that spilled) */
    uint8_t *lost;  /* kinds 3, 4: a flag per slot, all zero between launches: set where a slot's pair lost a bit */
    int64_t skip;   /* kinds 3, 4, per launch: some term spilled, so the compiled finish does this sink alone */
    int64_t failed; /* kinds 3, 4, per launch: some slot's pair lost a bit: the compiled finish does every slot
                     * (unlost_part first empties the pairs of the slots the fold wrote: the finish gives them back) */
    int64_t parts;  /* per launch: parts of this fold run, and the threads that ran them (tests read these) */
    int64_t threads;
    int64_t refill; /* kinds 0-2: the reset of `priv` whose fill the fold writes back into every value it reads
                     * (set once by the caller, eagle/native StageArgs; -1: none) */
    int64_t keys;   /* kinds 0-2: the Index plane whose values name the only slots the lanes add into
                     * (Layout.fold_keys; -1: none) */
    int64_t key_bytes; /* ... its values' width: 4 or 8 */
    int64_t sink, sink_bytes; /* kind 2: the sink (float64 or float32), which a keyed fold finishes itself */
    int64_t comp_refill; /* kind 2: the companion's reset (a keyed fold leaves the companion at its fill) */
    int64_t sparse; /* per launch: a run of one chunk of few lanes: keyed_fold folds the slots its keys name */
    int64_t direct; /* per launch, kind 2: one chunk's pairs are finished straight into the sink (pair_finish) */
} eagle_fold;

#define SPARSE_SHARE 16 /* a keyed fold when the run's lanes are fewer than a 16th of the slots: a lane's visit
                         * (a random sink line) costs about as much as 16 slots streamed by fold_range */

typedef struct {
    eagle_fn lanes, finish;
    int64_t *vals;        /* 5 descriptor slots per buffer (pointer, pointer, offset, size, stride) */
    void ***chunk_args;   /* per chunk: the packed argument array (void *[5 * buffers]) */
    void **finish_args;
    int64_t nchunks, threads;
    eagle_reset *resets;
    int64_t nresets;
    const eagle_copy *copies;
    int64_t ncopies;
    int64_t meta_buf, err_buf;
    eagle_fold *folds;
    int64_t nfolds, nparts; /* the folds run in `nparts` ranges of slots */
    int64_t copy_back;      /* 1: a launch that refuses nothing copies each staged scratch copy back into the
                             * caller's array (a stage launched alone: its commit; 0: the caller commits) */
    const eagle_copy *diverts; /* sinks written in place (`buf`, only the fold and finish write them): when the
                                * lanes refused, the fold and finish write `src` (a scratch array) instead */
    int64_t ndiverts;
} eagle_stage;

typedef void (*eagle_task)(const eagle_stage *, int64_t); /* task k of a launch's phase (a chunk, a fold part) */

#define MAX_WORKERS 1024
#define WORKER_SPIN_NS 50000 /* a worker polls this long for the next launch before it sleeps */
#define CALLER_SPIN_NS 200000 /* the caller polls this long for chunks still running before it sleeps */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t submit = PTHREAD_MUTEX_INITIALIZER; /* one launch at a time uses the pool */
static int workers;                /* pool threads started */
static int sleepers;               /* workers waiting on `wake` */
static uint32_t gen;               /* bumped for every launch handed to the pool (atomic reads outside mu) */
static const eagle_stage *current; /* the launch of generation `gen`, its task count and its task */
static int64_t current_n;
static eagle_task current_task;
static int wanted;                 /* workers 0 .. wanted-1 are asked to join it */
static int dealt;                  /* eagle_set_dealt: tasks dealt out (task k to participant k mod (wanted + 1)) */
static int current_dealt;          /* ... for the current launch */
static int waiting;                /* the caller sleeps on `done` */
static uint64_t born[MAX_WORKERS]; /* the generation when each worker was started: it joins only later ones */
/* A launch's tasks are split into one contiguous range per participant (the caller is participant 0, worker k
 * participant k + 1): each takes the tasks of its own range first, then those left in the others' (see claim),
 * so a thread runs the same chunks launch after launch while nobody is late (their data stay
 * in its core's cache: 1e5-5e5 lanes run again and again) and a thread slowed by other work still leaves its
 * later chunks to the rest. Each range is one word, (generation << 32) | (next << 16) | end, claimed by
 * compare-and-swap: a task is claimed only while its launch is current, so a worker that wakes late finds nothing
 * to do and never touches a finished launch; the caller waits only for tasks that were claimed, never for
 * workers that have not woken yet. (A launch of more than MAX_RANGED tasks, which eagle never asks for, runs
 * on the caller alone.) */
#define MAX_RANGED 0xffff
static uint64_t ranges[MAX_WORKERS + 1];
static int64_t completed;          /* chunks of the current launch run to the end */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Claim a task of launch g from range r, its first unclaimed one or (back) its last: 0 when it has none left (or
 * belongs to another launch). */
static int claim_from(uint32_t g, int r, int back, int64_t *task) {
    uint64_t t = __atomic_load_n(&ranges[r], __ATOMIC_ACQUIRE);
    for (;;) {
        uint64_t next = (t >> 16) & 0xffffu, end = t & 0xffffu;
        if ((uint32_t)(t >> 32) != g || next >= end)
            return 0;
        if (__atomic_compare_exchange_n(&ranges[r], &t, back ? t - 1 : t + (1u << 16), 1, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            *task = (int64_t)(back ? end - 1 : next);
            return 1;
        }
    }
}

/* Claim a task of launch g for participant `me` of `parts`: its own range first, then the others' in turn. A
 * range's owner walks it forwards in even launches and backwards in odd ones, so that the chunks it ran last (the
 * ones still in its cache when a range is larger than the cache) come first in the next launch; others take from
 * the end the owner reaches last. */
static int claim(uint32_t g, int me, int parts, int64_t *task) {
    for (int k = 0; k < parts; k++)
        if (claim_from(g, (me + k) % parts, (int)(g & 1u) ^ (k != 0), task))
            return 1;
    return 0;
}

/* The ranges of launch g: its n tasks (at most MAX_RANGED) in `parts` nearly equal contiguous ranges. */
static void split_ranges(uint32_t g, int64_t n, int parts) {
    for (int r = 0; r < parts; r++) {
        uint64_t lo = (uint64_t)(n * r / parts), hi = (uint64_t)(n * (r + 1) / parts);
        __atomic_store_n(&ranges[r], ((uint64_t)g << 32) | (lo << 16) | hi, __ATOMIC_RELAXED);
    }
}

/* A fill of n values: the first FILL_SEED bytes value by value, the rest copied from them block by block (the
 * seed stays in L1, so this runs at memset's speed, where gcc -O2 left the plain loop scalar: 8 MB of -0.0, the
 * start of a large sink's copies, 0.39-0.49 ms by the loop, 0.33-0.36 by blocks, 0.31-0.36 by memset). */
#define FILL_SEED 4096

static void fill_blocks(char *p, int64_t n, int64_t bytes) {
    int64_t total = n * bytes, seed = total < FILL_SEED ? total : FILL_SEED;
    for (int64_t at = seed; at < total; at += seed)
        memcpy(p + at, p, (size_t)(total - at < seed ? total - at : seed));
}

static void reset_range(const eagle_stage *s, const eagle_reset *r, int64_t first, int64_t n) {
    char *p = (char *)(intptr_t)s->vals[5 * r->buf] + first * r->bytes;
    if (r->kind == 0) {
        memset(p, 0, (size_t)(n * r->bytes));
        return;
    }
    int64_t head = FILL_SEED / r->bytes < n ? FILL_SEED / r->bytes : n;
    if (r->kind == 1) {
        double *d = (double *)p;
        for (int64_t i = 0; i < head; i++)
            d[i] = r->value;
    } else {
        float *f = (float *)p, v = (float)r->value;
        for (int64_t i = 0; i < head; i++)
            f[i] = v;
    }
    fill_blocks(p, n, r->bytes);
}

/* Chunk c's lanes, after resetting its own part of every per-chunk copy (so the copies of a large sink are reset
 * by every thread at once, each just before it writes it, rather than by the caller alone). */
static void run_chunk(const eagle_stage *s, int64_t c) {
    for (int64_t k = 0; k < s->nresets; k++) {
        const eagle_reset *r = &s->resets[k];
        if (r->split && s->nchunks > 1 && !r->clean) {
            int64_t per = s->vals[5 * r->buf + 3] / s->nchunks;
            reset_range(s, r, c * per, per);
        }
    }
    s->lanes(s->chunk_args[c]);
}

#define MAX_FOLDS 64

/* Slot k of a compensated float64 (`wide`) or float32 sink from its (sum, correction): (prior + sum) + correction
 * in float64, rounded once to the sink's type, a zero correction left out (-0.0 + +0.0 would be +0.0): the
 * compiled finish's finish_companions step for step. */
static inline void pair_into(void *sink, int wide, int64_t k, double sum, double fix) {
    double total = (wide ? ((double *)sink)[k] : (double)((float *)sink)[k]) + sum;
    total = fix == 0.0 ? total : total + fix;
    if (wide)
        ((double *)sink)[k] = total;
    else
        ((float *)sink)[k] = (float)total;
}

/* Slot k of a compensated sink from a one-chunk run's pair: the companion, from its fill, would take the pair's
 * very values, and the compiled finish would then give pair_into's bits; so the companion is never written. */
static inline void pair_finish(const eagle_stage *s, const eagle_fold *f, int64_t k, double sum, double fix) {
    pair_into((void *)(intptr_t)s->vals[5 * f->sink], f->sink_bytes == 8, k, sum, fix);
}

/* Slots [lo, hi) of one fold: each slot from its copies in chunk order, with the very steps of the compiled
 * finish (hawk/passes/lower/finish.py: plain adds, or host_emit.neumaier), so the bits are the finish's. */
static void fold_range(const eagle_stage *s, const eagle_fold *f, int64_t lo, int64_t hi) {
    int64_t n = f->slots, copies = s->nchunks;
    void *pv = (void *)(intptr_t)s->vals[5 * f->priv], *tv = (void *)(intptr_t)s->vals[5 * f->target];
    const eagle_reset *r = f->refill >= 0 ? &s->resets[f->refill] : NULL;
    double fill = r ? r->value : 0.0;
    /* copy by copy, each over the range's slots (streaming reads; each slot still sees its copies in order);
     * with `refill`, each value read is set back to the copies' fill (the next launch's reset, while the line is
     * in cache) */
    for (int64_t c = 0; c < copies; c++) {
        if (f->kind == 0) {
            double *restrict acc = tv, *restrict x = (double *)pv + c * n;
            if (r)
                for (int64_t i = lo; i < hi; i++) {
                    acc[i] = acc[i] + x[i];
                    x[i] = fill;
                }
            else
                for (int64_t i = lo; i < hi; i++)
                    acc[i] = acc[i] + x[i];
        } else if (f->kind == 1) {
            float *restrict acc = tv, *restrict x = (float *)pv + c * n, v = (float)fill;
            if (r)
                for (int64_t i = lo; i < hi; i++) {
                    acc[i] = acc[i] + x[i];
                    x[i] = v;
                }
            else
                for (int64_t i = lo; i < hi; i++)
                    acc[i] = acc[i] + x[i];
        } else {
            double *restrict acc = tv, *restrict x = (double *)pv + c * 2 * n; /* (sum, correction) pairs */
            if (f->direct) { /* (one chunk: straight into the sink) */
                for (int64_t i = lo; i < hi; i++) {
                    pair_finish(s, f, i, x[2 * i], x[2 * i + 1]);
                    if (r)
                        x[2 * i] = x[2 * i + 1] = fill;
                }
                continue;
            }
            for (int64_t i = lo; i < hi; i++) {
                double a = acc[2 * i], y = x[2 * i], t = a + y;
                double lost = fabs(a) >= fabs(y) ? (a - t) + y : (y - t) + a;
                acc[2 * i + 1] = (fabs(t) < INFINITY ? acc[2 * i + 1] + lost : acc[2 * i + 1]) + x[2 * i + 1];
                acc[2 * i] = t; /* (an infinite or NaN sum keeps no rounding error) */
                if (r)
                    x[2 * i] = x[2 * i + 1] = fill;
            }
        }
    }
}

/* A one-chunk run's copy folded at the slots its lanes' keys name, in lane order, each refilled as it is read:
 * every other slot of the copy holds its fill (-0.0: the reset, or the last launch's fold), whose add leaves the
 * target's bits as they are, and a key met again finds its slot refilled, so the bits are fold_range's. Keys
 * outside the sink (-1, or a bad key the lanes refused) name nothing the lanes wrote. */
static void keyed_fold(const eagle_stage *s, const eagle_fold *f) {
    const int64_t *meta = (const int64_t *)(intptr_t)s->vals[5 * s->meta_buf];
    int64_t n = f->slots, lo = meta[0], hi = meta[1], size = s->vals[5 * f->keys + 3];
    const void *kv = (const void *)(intptr_t)s->vals[5 * f->keys];
    void *pv = (void *)(intptr_t)s->vals[5 * f->priv], *tv = (void *)(intptr_t)s->vals[5 * f->target];
    double fill = s->resets[f->refill].value;
    hi = hi < size ? hi : size;
    for (int64_t i = lo < 0 ? 0 : lo; i < hi; i++) {
        int64_t k = f->key_bytes == 8 ? ((const int64_t *)kv)[i] : ((const int32_t *)kv)[i];
        if (k < 0 || k >= n)
            continue;
        if (f->kind == 0) {
            double *acc = tv, *x = pv;
            acc[k] = acc[k] + x[k];
            x[k] = fill;
        } else if (f->kind == 1) {
            float *acc = tv, *x = pv;
            acc[k] = acc[k] + x[k];
            x[k] = (float)fill;
        } else { /* (sum, correction) side by side, straight into the sink (a keyed fold is `direct`) */
            double *x = pv;
            pair_finish(s, f, k, x[2 * k], x[2 * k + 1]);
            x[2 * k] = x[2 * k + 1] = fill;
        }
    }
}

/* Slots [lo, hi) of a slot-range stage's compensated sink (kinds 5, 6): slot = (prior + sum) + correction in
 * float64, rounded once to the sink's type: the compiled finish's finish_companions step for step (its loop then
 * sees an empty sink). */
static void companion_range(const eagle_stage *s, const eagle_fold *f, int64_t lo, int64_t hi) {
    const double *pair = (const double *)(intptr_t)s->vals[5 * f->priv]; /* (sum, correction) side by side */
    void *sink = (void *)(intptr_t)s->vals[5 * f->target];
    if (f->kind == 5) /* (a constant width: each loop its own inlined step) */
        for (int64_t i = lo; i < hi; i++)
            pair_into(sink, 1, i, pair[2 * i], pair[2 * i + 1]);
    else
        for (int64_t i = lo; i < hi; i++)
            pair_into(sink, 0, i, pair[2 * i], pair[2 * i + 1]);
}

/* (hi, lo) += x by two TwoSums, the compiled finish's _pair_add step for step; ok stays 1 while the pair holds the
 * exact sum (the second error is zero: false for NaN too, which an infinite or NaN sum makes it). */
#define PAIR_ADD(T, hi, lo, ok, x)                                         \
    do {                                                                   \
        T s1_ = (hi) + (x), b1_ = s1_ - (hi);                              \
        T e1_ = ((hi) - (s1_ - b1_)) + ((x) - b1_);                        \
        T s2_ = (lo) + e1_, b2_ = s2_ - (lo);                              \
        T e2_ = ((lo) - (s2_ - b2_)) + (e1_ - b2_);                        \
        (hi) = s1_;                                                        \
        (lo) = s2_;                                                        \
        (ok) &= e2_ == (T)0;                                               \
    } while (0)

typedef double eagle_v2d __attribute__((vector_size(16)));
typedef int64_t eagle_v2l __attribute__((vector_size(16)));
#if defined(__clang__)
#define PICK(a, b, i, j) __builtin_shufflevector(a, b, i, j)
#else
#define PICK(a, b, i, j) __builtin_shuffle(a, b, (eagle_v2l){i, j})
#endif

/* PAIR_ADD on two slots at once (the same IEEE steps in each lane of the vector); bad: lanes that lost a bit. */
#define PAIR_ADD2(hi, lo, bad, x)                                          \
    do {                                                                   \
        eagle_v2d s1_ = (hi) + (x), b1_ = s1_ - (hi);                      \
        eagle_v2d e1_ = ((hi) - (s1_ - b1_)) + ((x) - b1_);                \
        eagle_v2d s2_ = (lo) + e1_, b2_ = s2_ - (lo);                      \
        eagle_v2d e2_ = ((lo) - (s2_ - b2_)) + (e1_ - b2_);                \
        (hi) = s1_;                                                        \
        (lo) = s2_;                                                        \
        (bad) |= e2_ != (eagle_v2d){0.0, 0.0};                             \
    } while (0)

static inline eagle_v2d load2(const double *p) {
    eagle_v2d v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Slot i of an ordered sink (the compiled finish's fast path, hawk/passes/lower/finish.py finish_exact): its prior
 * content, then every chunk's (high, low) pair in chunk order, added by TwoSums into one pair; the sink gets
 * fl(high + low), the correctly rounded exact sum. A slot whose pair lost a bit keeps its content and its flag in
 * `lost` is set (and the fold marked failed: see unlost_part). */
#define PAIR_SLOT(T, sink, pairs, n, copies, f, i)                                           \
    do {                                                                                     \
        T h_ = (T)0, l_ = (T)0;                                                              \
        int ok_ = 1;                                                                         \
        PAIR_ADD(T, h_, l_, ok_, (sink)[i]);                                                 \
        for (int64_t c_ = 0; c_ < (copies); c_++) {                                          \
            const T *p_ = (pairs) + 2 * (c_ * (n) + (i));                                    \
            PAIR_ADD(T, h_, l_, ok_, p_[0]);                                                 \
            PAIR_ADD(T, h_, l_, ok_, p_[1]);                                                 \
        }                                                                                    \
        if (ok_) {                                                                           \
            (sink)[i] = h_ + l_;                                                             \
        } else {                                                                             \
            (f)->lost[i] = 1;                                                                \
            __atomic_store_n(&(f)->failed, 1, __ATOMIC_RELAXED);                             \
        }                                                                                    \
    } while (0)

/* Slots [first, last) of a float64 ordered sink: four slots at a time in two vectors (their pairs de-interleaved),
 * the rest one by one; every slot gets exactly PAIR_SLOT's steps. */
static void pairs_range_f64(const eagle_stage *s, eagle_fold *f, int64_t first, int64_t last) {
    int64_t n = f->slots, copies = s->vals[5 * f->priv + 3] / (2 * n), i = first;
    double *sink = (double *)(intptr_t)s->vals[5 * f->target];
    const double *pairs = (const double *)(intptr_t)s->vals[5 * f->priv];
    for (; i + 4 <= last; i += 4) {
        eagle_v2d h0 = {0.0, 0.0}, l0 = h0, h1 = h0, l1 = h0;
        eagle_v2l bad0 = {0, 0}, bad1 = bad0;
        PAIR_ADD2(h0, l0, bad0, load2(sink + i));
        PAIR_ADD2(h1, l1, bad1, load2(sink + i + 2));
        for (int64_t c = 0; c < copies; c++) {
            const double *p = pairs + 2 * (c * n + i);
            eagle_v2d a = load2(p), b = load2(p + 2), d = load2(p + 4), e = load2(p + 6);
            PAIR_ADD2(h0, l0, bad0, PICK(a, b, 0, 2));
            PAIR_ADD2(h1, l1, bad1, PICK(d, e, 0, 2));
            PAIR_ADD2(h0, l0, bad0, PICK(a, b, 1, 3));
            PAIR_ADD2(h1, l1, bad1, PICK(d, e, 1, 3));
        }
        eagle_v2d r0 = h0 + l0, r1 = h1 + l1;
        if (!(bad0[0] | bad0[1] | bad1[0] | bad1[1])) {
            memcpy(sink + i, &r0, sizeof r0);
            memcpy(sink + i + 2, &r1, sizeof r1);
            continue;
        }
        for (int64_t j = i; j < i + 4; j++) /* (some slot lost a bit: these four again, one by one) */
            PAIR_SLOT(double, sink, pairs, n, copies, f, j);
    }
    for (; i < last; i++)
        PAIR_SLOT(double, sink, pairs, n, copies, f, i);
}

/* Slots [first, last) of a float32 ordered sink (float64 pairs), one by one: the compiled finish's fast path
 * (finish.py finish_exact, _round_pair): the prior content and every chunk's pair by TwoSums in float64, then
 * (h, l) = TwoSum(high, low) and the float32 nearest h, which is the float32 nearest h + l unless h lies exactly
 * halfway between two float32 values (its 29 bits past float32's precision are 1 then zeros) and l is not zero:
 * such a slot, like one whose pair lost a bit, is left to the compiled finish. */
static void pairs_range_f32(const eagle_stage *s, eagle_fold *f, int64_t first, int64_t last) {
    int64_t n = f->slots, copies = s->vals[5 * f->priv + 3] / (2 * n);
    float *sink = (float *)(intptr_t)s->vals[5 * f->target];
    const double *pairs = (const double *)(intptr_t)s->vals[5 * f->priv];
    for (int64_t i = first; i < last; i++) {
        double h = 0.0, l = 0.0;
        int ok = 1;
        PAIR_ADD(double, h, l, ok, (double)sink[i]);
        for (int64_t c = 0; c < copies; c++) {
            const double *p = pairs + 2 * (c * n + i);
            PAIR_ADD(double, h, l, ok, p[0]);
            PAIR_ADD(double, h, l, ok, p[1]);
        }
        double t = h + l, b = t - h, low = (h - (t - b)) + (l - b);
        uint64_t bits;
        memcpy(&bits, &t, sizeof bits);
        if (ok && (low == 0.0 || (bits & ((UINT64_C(1) << 29) - 1)) != (UINT64_C(1) << 28))) {
            sink[i] = (float)t;
        } else {
            f->lost[i] = 1;
            __atomic_store_n(&f->failed, 1, __ATOMIC_RELAXED);
        }
    }
}

/* Part p after a fold that lost a bit somewhere: the slots the fold wrote get empty pairs (so the compiled finish,
 * which then runs over every slot, rounds their written value again and gives it back: a finite value comes
 * back as itself, an infinity through the exact path); the lost slots keep theirs, and their flags are cleared. */
static void unlost_part(const eagle_stage *s, int64_t p) {
    for (int64_t k = 0; k < s->nfolds && k < MAX_FOLDS; k++) {
        eagle_fold *f = &s->folds[k];
        if ((f->kind != 3 && f->kind != 4) || f->skip || !f->failed)
            continue;
        int64_t n = f->slots, lo = n * p / s->nparts, hi = n * (p + 1) / s->nparts;
        int64_t copies = s->vals[5 * f->priv + 3] / (2 * n), size = 8; /* (float64 pairs, either sink) */
        char *pairs = (char *)(intptr_t)s->vals[5 * f->priv];
        for (int64_t c = 0; c < copies; c++)
            for (int64_t i = lo; i < hi; i++)
                if (!f->lost[i])
                    memset(pairs + 2 * size * (c * n + i), 0, (size_t)(2 * size));
        memset(f->lost + lo, 0, (size_t)(hi - lo));
    }
}

static __thread const eagle_fold *seen_fold; /* the fold whose launch this thread last ran a part of */
static __thread int64_t seen_launch;
static int64_t fold_launches; /* fold phases so far (tells one launch's parts from the next one's) */

/* Part p of the fold phase: its share of every fold's slots. */
static void fold_part(const eagle_stage *s, int64_t p) {
    for (int64_t k = 0; k < s->nfolds && k < MAX_FOLDS; k++) {
        eagle_fold *f = &s->folds[k];
        int64_t lo = f->slots * p / s->nparts, hi = f->slots * (p + 1) / s->nparts;
        if (f->sparse) {
            if (p != 0)
                continue; /* (part 0 takes the keyed fold whole: its slots are the lanes' keys, in lane order) */
            keyed_fold(s, f);
        } else if (f->kind == 3 || f->kind == 4) {
            if (f->skip)
                continue;
            (f->kind == 3 ? pairs_range_f64 : pairs_range_f32)(s, f, lo, hi);
        } else if (f->kind == 5 || f->kind == 6) {
            companion_range(s, f, lo, hi);
        } else {
            fold_range(s, f, lo, hi);
        }
        __atomic_add_fetch(&f->parts, 1, __ATOMIC_RELAXED);
        int64_t launch = __atomic_load_n(&fold_launches, __ATOMIC_RELAXED);
        if (seen_fold != f || seen_launch != launch) {
            seen_fold = f;
            seen_launch = launch;
            __atomic_add_fetch(&f->threads, 1, __ATOMIC_RELAXED);
        }
    }
}

/* A task of the current launch (of n) ran to the end: the last one wakes the caller if it sleeps. */
static void task_done(int64_t n) {
    if (__atomic_add_fetch(&completed, 1, __ATOMIC_ACQ_REL) == n) {
        pthread_mutex_lock(&mu);
        if (waiting)
            pthread_cond_signal(&done);
        pthread_mutex_unlock(&mu);
    }
}

/* Participant `me` of a dealt launch (0 .. parts-1): tasks me, me + parts, ... (the launch cannot end before they
 * are done, so `s` stays valid). */
static void run_share(const eagle_stage *s, int64_t n, eagle_task task, int me, int parts) {
    for (int64_t c = me; c < n; c += parts) {
        task(s, c);
        task_done(n);
    }
}

/* Run chunks of launch `g` until none is left to claim (`s` is dereferenced only after a successful claim: the
 * launch is then still running, its caller waiting for that very chunk). */
static void run_chunks(uint32_t g, const eagle_stage *s, int64_t n, eagle_task task, int me, int parts) {
    int64_t c;
    while (claim(g, me, parts, &c)) {
        task(s, c);
        task_done(n);
    }
}

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    fp_ieee(); /* (a thread starts with its creator's mode, which may flush subnormals) */
    uint32_t seen = (uint32_t)born[me];
    int join = 0;
    for (;;) {
        int64_t until = now_ns() + WORKER_SPIN_NS; /* (only a worker that just ran chunks polls) */
        for (int k = 0; join && __atomic_load_n(&gen, __ATOMIC_ACQUIRE) == seen; k++) {
            cpu_relax();
            if ((k & 63) == 63 && now_ns() > until)
                break;
        }
        pthread_mutex_lock(&mu);
        while (gen == seen) {
            sleepers++;
            pthread_cond_wait(&wake, &mu);
            sleepers--;
        }
        seen = gen;
        const eagle_stage *s = current;
        int64_t n = current_n;
        eagle_task task = current_task;
        int share = current_dealt, parts = wanted + 1;
        join = me < wanted && s != NULL;
        pthread_mutex_unlock(&mu);
        if (join && share)
            run_share(s, n, task, me, parts);
        else if (join)
            run_chunks(seen, s, n, task, me + 1, parts);
    }
    return NULL;
}

/* Start workers until there are `n` (or as many as the system gives); returns how many there are. */
static int grow(int n) {
    if (n > MAX_WORKERS)
        n = MAX_WORKERS;
    while (workers < n) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        born[workers] = gen; /* (gen changes only under `submit`, which the caller of grow holds) */
        int rc = pthread_create(&t, &attr, worker, (void *)(intptr_t)workers);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        pthread_mutex_lock(&mu);
        workers++;
        pthread_mutex_unlock(&mu);
    }
    return workers;
}

/* After fork() only the forking thread exists in the child: start from an empty pool there. */
static void after_fork_child(void) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    mu = m;
    submit = m;
    wake = c;
    done = c;
    workers = sleepers = wanted = waiting = 0;
    current = NULL;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init_once(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* Run tasks 0..n-1 of one phase of a launch on the caller and `helpers` pool threads. */
static void run_all(const eagle_stage *s, int helpers, int64_t n, eagle_task task) {
    if (helpers <= 0 || n > MAX_RANGED || pthread_mutex_trylock(&submit) != 0) { /* one thread, or the pool is
                                                                   busy with another caller's launch: run alone */
        for (int64_t c = 0; c < n; c++)
            task(s, c);
        return;
    }
    int have = grow(helpers);
    pthread_mutex_lock(&mu);
    uint32_t g = gen + 1;
    current = s;
    current_n = n;
    current_task = task;
    current_dealt = dealt;
    wanted = dealt && have < helpers ? have : helpers; /* (dealt: only workers that exist get a share) */
    int parts = wanted + 1;
    __atomic_store_n(&completed, 0, __ATOMIC_RELAXED);
    split_ranges(g, n, parts);
    __atomic_store_n(&gen, g, __ATOMIC_RELEASE);
    if (sleepers)
        pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    if (current_dealt)
        run_share(s, n, task, parts - 1, parts);
    else
        run_chunks(g, s, n, task, 0, parts);
    int64_t until = now_ns() + CALLER_SPIN_NS;
    for (int k = 0; __atomic_load_n(&completed, __ATOMIC_ACQUIRE) < n; k++) {
        cpu_relax();
        if ((k & 63) == 63 && now_ns() > until)
            break;
    }
    pthread_mutex_lock(&mu);
    while (__atomic_load_n(&completed, __ATOMIC_ACQUIRE) < n) {
        waiting = 1;
        pthread_cond_wait(&done, &mu);
    }
    waiting = 0;
    current = NULL;
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&submit);
}


/* Run one launch of a stage (see the top of this file), in IEEE mode (fp_ieee). Returns 1 when the #err buffer
 * holds a refusal. */
static int fire(const eagle_stage *s);

#define MAX_DIVERTS 64

/* Whether #err holds a refusal (a bad key counted by some chunk). */
static int refused(const eagle_stage *s) {
    const int64_t *err = (const int64_t *)(intptr_t)s->vals[5 * s->err_buf];
    int64_t n = s->vals[5 * s->err_buf + 3];
    for (int64_t i = 0; i < n; i++)
        if (err[i])
            return 1;
    return 0;
}

int eagle_fire(const eagle_stage *s) {
    fp_mode caller = fp_ieee();
    int rc = fire(s);
    fp_restore(caller);
    return rc;
}

static int fire(const eagle_stage *s) {
    pthread_once(&once, init_once);
    for (int64_t k = 0; k < s->ncopies; k++)
        memcpy((void *)(intptr_t)s->vals[5 * s->copies[k].buf], s->copies[k].src, (size_t)s->copies[k].bytes);
    for (int64_t k = 0; k < s->nresets; k++) {
        eagle_reset *r = &s->resets[k];
        if (r->clean != s->vals[5 * r->buf]) /* (left at its fill by the last launch's fold: still the same array) */
            r->clean = 0;
        if (!r->clean && (!r->split || s->nchunks == 1))
            reset_range(s, r, 0, s->vals[5 * r->buf + 3]);
    }
    int64_t *meta = (int64_t *)(intptr_t)s->vals[5 * s->meta_buf];
    if (s->nchunks == 1) {
        meta[2] = 0;
        s->lanes(s->chunk_args[0]);
    } else {
        int64_t t = s->threads < s->nchunks ? s->threads : s->nchunks;
        run_all(s, (int)(t - 1), s->nchunks, run_chunk);
    }
    for (int64_t k = 0; k < s->nresets; k++) /* (the lanes have written the copies) */
        s->resets[k].clean = 0;
    int64_t aside[MAX_DIVERTS][2], naside = 0; /* (buffer, its pointer): sinks left alone by a refused launch */
    if (s->ndiverts && s->ndiverts <= MAX_DIVERTS && refused(s))
        for (int64_t k = 0; k < s->ndiverts; k++) {
            int64_t b = s->diverts[k].buf;
            aside[naside][0] = b;
            aside[naside++][1] = s->vals[5 * b];
            s->vals[5 * b] = s->vals[5 * b + 1] = (int64_t)(intptr_t)s->diverts[k].src;
        }
    meta[2] = s->nchunks;
    int64_t hidden[2 * MAX_FOLDS][2]; /* (buffer, size) the finish must not see while it runs */
    int64_t nhidden = 0;
    int64_t nfolds = s->nfolds <= MAX_FOLDS ? s->nfolds : 0; /* (one chunk: only copies' folds are planned) */
    if (nfolds) {
        for (int64_t k = 0; k < nfolds; k++) {
            eagle_fold *f = &s->folds[k];
            f->parts = f->threads = f->failed = 0;
            f->direct = f->kind == 2 && s->nchunks == 1 && f->sink >= 0 && f->comp_refill >= 0;
            f->sparse = f->keys >= 0 && f->kind <= 2 && f->refill >= 0 && s->nchunks == 1 &&
                        (f->kind != 2 || f->direct) &&
                        (meta[1] - meta[0]) * SPARSE_SHARE < f->slots;
            if (f->kind == 3 || f->kind == 4) { /* a term that spilled: every slot takes the finish's exact path */
                const int64_t *ex = (const int64_t *)(intptr_t)s->vals[5 * f->exact];
                f->skip = ex[s->vals[5 * f->exact + 3] - 1] != 0;
            }
        }
        __atomic_add_fetch(&fold_launches, 1, __ATOMIC_RELAXED);
        int64_t t = s->threads < s->nparts ? s->threads : s->nparts, failed = 0;
        run_all(s, (int)(t - 1), s->nparts, fold_part);
        for (int64_t k = 0; k < nfolds; k++) { /* every part ran: the copies hold their fill again */
            const eagle_fold *f = &s->folds[k];
            if (f->refill >= 0)
                s->resets[f->refill].clean = s->vals[5 * s->resets[f->refill].buf];
            if (f->direct) /* (and a direct fold left the companion at its fill) */
                s->resets[f->comp_refill].clean = s->vals[5 * s->resets[f->comp_refill].buf];
        }
        for (int64_t k = 0; k < nfolds; k++)
            failed |= (s->folds[k].kind == 3 || s->folds[k].kind == 4) && !s->folds[k].skip && s->folds[k].failed;
        if (failed)
            run_all(s, (int)(t - 1), s->nparts, unlost_part);
        for (int64_t k = 0; k < nfolds; k++) {
            eagle_fold *f = &s->folds[k];
            if (f->kind == 3 || f->kind == 4) {
                if (f->skip || f->failed) /* the compiled finish does every slot */
                    continue;
                /* the finish sees one slot and no pairs: it rounds slot 0's value again, which gives it back */
                hidden[nhidden][0] = f->target;
                hidden[nhidden++][1] = s->vals[5 * f->target + 3];
                s->vals[5 * f->target + 3] = 1;
            } else if (f->kind == 5 || f->kind == 6 || f->direct) { /* the finish's companion loop runs over
                                                                          * no slots */
                int64_t b = f->direct ? f->sink : f->target;
                hidden[nhidden][0] = b;
                hidden[nhidden++][1] = s->vals[5 * b + 3];
                s->vals[5 * b + 3] = 0;
            }
            hidden[nhidden][0] = f->priv; /* the finish finds no copies of these sinks left to fold */
            hidden[nhidden++][1] = s->vals[5 * f->priv + 3];
            s->vals[5 * f->priv + 3] = 0;
        }
    }
    s->finish(s->finish_args);
    for (int64_t k = 0; k < nhidden; k++)
        s->vals[5 * hidden[k][0] + 3] = hidden[k][1];
    for (int64_t k = 0; k < naside; k++)
        s->vals[5 * aside[k][0]] = s->vals[5 * aside[k][0] + 1] = aside[k][1];
    if (refused(s))
        return 1; /* (a refusal: the caller's arrays keep what they held) */
    if (s->copy_back)
        for (int64_t k = 0; k < s->ncopies; k++)
            memcpy((void *)s->copies[k].src, (const void *)(intptr_t)s->vals[5 * s->copies[k].buf],
                   (size_t)s->copies[k].bytes);
    return 0;
}

/* Call a compiled entry taking one pointer (a GPU stage's host finish) in IEEE mode, as eagle_fire runs its own. */
void eagle_call_ieee(void (*entry)(void *), void *args) {
    fp_mode caller = fp_ieee();
    entry(args);
    fp_restore(caller);
}

/* Tests: deal every phase's tasks out to the caller and each helper (1) or let them claim tasks as they come
 * (0, the default); returns the previous setting. Takes effect from the next launch. */
int eagle_set_dealt(int on) {
    pthread_mutex_lock(&submit); /* (not while a launch runs) */
    int was = dealt;
    dealt = on != 0;
    pthread_mutex_unlock(&submit);
    return was;
}

/* Pool threads started so far (tests and benchmarks read it). */
int eagle_pool_size(void) {
    pthread_mutex_lock(&mu);
    int n = workers;
    pthread_mutex_unlock(&mu);
    return n;
}
