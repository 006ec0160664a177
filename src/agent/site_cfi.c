/* site_cfi.c — detail mode's fast stack walk: the DWARF call-frame
 * information every x86-64 object carries in .eh_frame (what libunwind
 * and C++ exceptions use), reduced per return address to the two rules a
 * walk needs — where the CFA is (rsp or rbp plus an offset) and where the
 * caller's rbp was saved — and cached per thread. A walk is then a few
 * loads per frame, with no cursor to set up.
 *
 * Anything this does not handle (a CFA given by an expression or by
 * another register, a signal frame, an object without .eh_frame_hdr, a
 * frame that leaves the thread's stack) makes the walk give up; the
 * caller then asks libunwind. Reads of the stack stay inside the thread's
 * stack; unwind tables are read where the loader mapped them
 * (_dl_find_object: lock-free, no allocation). */
#include <errno.h>
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/site.h"

_Atomic unsigned mt_code_gen; /* bumped by dlclose: cached rules may be stale */
_Atomic int mt_unloading;

enum { RULE_EMPTY, RULE_OK, RULE_END, RULE_UNKNOWN };
enum { DWREG_RBP = 6, DWREG_RSP = 7, DWREG_RA = 16 };

/* One return address's rules, 16 bytes. */
typedef struct cfi_rule {
    uintptr_t pc;    /* the return address */
    int32_t cfa_off; /* CFA = (cfa_reg) + cfa_off */
    int16_t bp_off;  /* the caller's rbp is at CFA + bp_off; 0: rbp unchanged */
    uint8_t cfa_reg; /* DWREG_RSP or DWREG_RBP */
    uint8_t kind;    /* RULE_* */
} cfi_rule;

#define CACHE_BITS 14
#define CACHE_SIZE (1u << CACHE_BITS)

/* ---- reading DWARF data ------------------------------------------------- */

static uint64_t uleb(const uint8_t **p)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        b = *(*p)++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    return v;
}

static int64_t sleb(const uint8_t **p)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        b = *(*p)++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

/* A pointer in DW_EH_PE encoding `enc`; datarel is relative to the
 * .eh_frame_hdr. Returns 0, or -1 for an encoding we do not read. */
static int read_encoded(const uint8_t **p, uint8_t enc, uintptr_t hdr, uintptr_t *out)
{
    const uint8_t *at = *p;
    uintptr_t v;
    if (enc == 0xff)
        return -1;
    switch (enc & 0x0f) {
    case 0x00:
        memcpy(&v, at, 8);
        *p += 8;
        break;
    case 0x01: v = (uintptr_t)uleb(p); break;
    case 0x02: {
        uint16_t x;
        memcpy(&x, at, 2);
        v = x;
        *p += 2;
        break;
    }
    case 0x03: {
        uint32_t x;
        memcpy(&x, at, 4);
        v = x;
        *p += 4;
        break;
    }
    case 0x04: {
        uint64_t x;
        memcpy(&x, at, 8);
        v = (uintptr_t)x;
        *p += 8;
        break;
    }
    case 0x09: v = (uintptr_t)sleb(p); break;
    case 0x0a: {
        int16_t x;
        memcpy(&x, at, 2);
        v = (uintptr_t)(intptr_t)x;
        *p += 2;
        break;
    }
    case 0x0b: {
        int32_t x;
        memcpy(&x, at, 4);
        v = (uintptr_t)(intptr_t)x;
        *p += 4;
        break;
    }
    case 0x0c: {
        int64_t x;
        memcpy(&x, at, 8);
        v = (uintptr_t)x;
        *p += 8;
        break;
    }
    default: return -1;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (uintptr_t)at; break; /* pcrel */
    case 0x30: v += hdr; break;           /* datarel */
    default: return -1;
    }
    if (enc & 0x80)
        memcpy(&v, (const void *)v, sizeof v); /* indirect */
    *out = v;
    return 0;
}

/* The FDE covering pc, by binary search of .eh_frame_hdr's table. */
static const uint8_t *find_fde(uintptr_t pc, uintptr_t *hdr_out)
{
    struct dl_find_object dlfo;
    if (_dl_find_object((void *)pc, &dlfo) != 0 || !dlfo.dlfo_eh_frame)
        return NULL;
    const uint8_t *hdr = dlfo.dlfo_eh_frame, *p = hdr + 4;
    uintptr_t base = (uintptr_t)hdr, eh_frame, count;
    /* version 1; table entries as datarel sdata4 pairs (what every linker writes) */
    if (hdr[0] != 1 || hdr[3] != 0x3b)
        return NULL;
    if (read_encoded(&p, hdr[1], base, &eh_frame) < 0 || read_encoded(&p, hdr[2], base, &count) < 0)
        return NULL;
    const int32_t *table = (const int32_t *)p;
    size_t lo = 0, hi = count;
    while (lo < hi) { /* the last entry whose start <= pc */
        size_t mid = lo + (hi - lo) / 2;
        if (base + (intptr_t)table[2 * mid] <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    *hdr_out = base;
    return (const uint8_t *)(base + (intptr_t)table[2 * (lo - 1) + 1]);
}

/* The state the CFA program builds: the CFA rule, and rbp's and the
 * return address's (offsets from the CFA; 0 = not saved / undefined). */
typedef struct cfa_state {
    int cfa_reg, cfa_expr;
    int64_t cfa_off;
    int64_t bp_off;
    int ra_saved, ra_undefined;
    int64_t ra_off;
} cfa_state;

typedef struct cie_info {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int has_aug_data;
    int signal_frame;
    const uint8_t *insns, *end;
} cie_info;

static int parse_cie(const uint8_t *cie, uintptr_t hdr, cie_info *ci)
{
    uint32_t len32;
    memcpy(&len32, cie, 4);
    if (len32 == 0xffffffffu)
        return -1; /* 64-bit DWARF: not written for .eh_frame */
    const uint8_t *p = cie + 8, *end = cie + 4 + len32;
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    p += strlen(aug) + 1;
    memset(ci, 0, sizeof *ci);
    ci->fde_enc = 0; /* absptr */
    ci->code_align = uleb(&p);
    ci->data_align = sleb(&p);
    ci->ra_reg = version == 1 ? *p++ : uleb(&p);
    if (aug[0] == 'z') {
        ci->has_aug_data = 1;
        uint64_t alen = uleb(&p);
        const uint8_t *aend = p + alen;
        for (const char *a = aug + 1; *a; a++) {
            uintptr_t ignored;
            if (*a == 'R')
                ci->fde_enc = *p++;
            else if (*a == 'L')
                p++;
            else if (*a == 'P') {
                uint8_t enc = *p++;
                if (read_encoded(&p, enc, hdr, &ignored) < 0)
                    return -1;
            } else if (*a == 'S')
                ci->signal_frame = 1;
            else
                break; /* unknown: the length says where the data ends */
        }
        p = aend;
    } else if (aug[0]) {
        return -1;
    }
    ci->insns = p;
    ci->end = end;
    return 0;
}

/* Runs CFA instructions [p, end) while the location is <= target. */
static int run_cfa(const uint8_t *p, const uint8_t *end, uintptr_t loc, uintptr_t target, const cie_info *ci,
                   cfa_state *st, const cfa_state *initial, uintptr_t hdr)
{
    cfa_state stack[8];
    int depth = 0;
    while (p < end) {
        uint8_t op = *p++, low = op & 0x3f;
        uint64_t reg;
        int64_t off;
        uintptr_t adv = 0;
        switch (op >> 6) {
        case 1: adv = low * ci->code_align; goto advance;
        case 2: /* offset */
            off = (int64_t)uleb(&p) * ci->data_align;
            reg = low;
            goto set_offset;
        case 3: /* restore */ reg = low; goto restore;
        default: break;
        }
        switch (op) {
        case 0x00: continue; /* nop */
        case 0x01:           /* set_loc */
            if (read_encoded(&p, ci->fde_enc, hdr, &loc) < 0)
                return -1;
            if (loc > target)
                return 0;
            continue;
        case 0x02: adv = *p++ * ci->code_align; goto advance;
        case 0x03: {
            uint16_t x;
            memcpy(&x, p, 2);
            p += 2;
            adv = x * ci->code_align;
            goto advance;
        }
        case 0x04: {
            uint32_t x;
            memcpy(&x, p, 4);
            p += 4;
            adv = x * ci->code_align;
            goto advance;
        }
        case 0x05:
            reg = uleb(&p);
            off = (int64_t)uleb(&p) * ci->data_align;
            goto set_offset;
        case 0x06: reg = uleb(&p); goto restore;
        case 0x07: /* undefined */
            reg = uleb(&p);
            if (reg == DWREG_RA)
                st->ra_undefined = 1;
            else if (reg == DWREG_RBP)
                st->bp_off = 0;
            continue;
        case 0x08: /* same_value */
            reg = uleb(&p);
            if (reg == DWREG_RBP)
                st->bp_off = 0;
            else if (reg == DWREG_RA)
                return -1;
            continue;
        case 0x09: /* register */
            reg = uleb(&p);
            uleb(&p);
            if (reg == DWREG_RBP || reg == DWREG_RA)
                return -1;
            continue;
        case 0x0a:
            if (depth == 8)
                return -1;
            stack[depth++] = *st;
            continue;
        case 0x0b:
            if (depth == 0)
                return -1;
            *st = stack[--depth];
            continue;
        case 0x0c:
            st->cfa_reg = (int)uleb(&p);
            st->cfa_off = (int64_t)uleb(&p);
            st->cfa_expr = 0;
            continue;
        case 0x0d:
            st->cfa_reg = (int)uleb(&p);
            st->cfa_expr = 0;
            continue;
        case 0x0e: st->cfa_off = (int64_t)uleb(&p); continue;
        case 0x0f: /* def_cfa_expression */
            st->cfa_expr = 1;
            p += uleb(&p);
            continue;
        case 0x10: /* expression */
            reg = uleb(&p);
            p += uleb(&p);
            if (reg == DWREG_RBP || reg == DWREG_RA)
                return -1;
            continue;
        case 0x11:
            reg = uleb(&p);
            off = sleb(&p) * ci->data_align;
            goto set_offset;
        case 0x12:
            st->cfa_reg = (int)uleb(&p);
            st->cfa_off = sleb(&p) * ci->data_align;
            st->cfa_expr = 0;
            continue;
        case 0x13: st->cfa_off = sleb(&p) * ci->data_align; continue;
        case 0x14:
        case 0x15: /* val_offset(_sf): a value, not a save slot */
            reg = uleb(&p);
            if (op == 0x14)
                uleb(&p);
            else
                sleb(&p);
            if (reg == DWREG_RBP || reg == DWREG_RA)
                return -1;
            continue;
        case 0x16: /* val_expression */
            reg = uleb(&p);
            p += uleb(&p);
            if (reg == DWREG_RBP || reg == DWREG_RA)
                return -1;
            continue;
        case 0x2e: uleb(&p); continue; /* GNU_args_size */
        case 0x2f:
            reg = uleb(&p);
            off = -(int64_t)uleb(&p) * ci->data_align;
            goto set_offset;
        default: return -1;
        }
    advance:
        loc += adv;
        if (loc > target)
            return 0;
        continue;
    set_offset:
        if (reg == DWREG_RBP)
            st->bp_off = off;
        else if (reg == DWREG_RA) {
            st->ra_saved = 1;
            st->ra_undefined = 0;
            st->ra_off = off;
        }
        continue;
    restore:
        if (reg == DWREG_RBP)
            st->bp_off = initial->bp_off;
        else if (reg == DWREG_RA) {
            st->ra_saved = initial->ra_saved;
            st->ra_off = initial->ra_off;
            st->ra_undefined = initial->ra_undefined;
        }
        continue;
    }
    return 0;
}

/* The rules at return address ra (the call is at ra - 1). */
static void compute_rule(uintptr_t ra, cfi_rule *r)
{
    uintptr_t target = ra - 1, hdr = 0;
    r->kind = RULE_UNKNOWN;
    const uint8_t *fde = find_fde(target, &hdr);
    if (!fde)
        return;
    uint32_t len32, cie_off;
    memcpy(&len32, fde, 4);
    memcpy(&cie_off, fde + 4, 4);
    if (len32 == 0 || len32 == 0xffffffffu || cie_off == 0)
        return;
    cie_info ci;
    if (parse_cie(fde + 4 - cie_off, hdr, &ci) < 0 || ci.signal_frame || ci.ra_reg != DWREG_RA)
        return;
    const uint8_t *p = fde + 8, *end = fde + 4 + len32;
    uintptr_t start, range;
    if (read_encoded(&p, ci.fde_enc, hdr, &start) < 0 || read_encoded(&p, ci.fde_enc & 0x0f, hdr, &range) < 0)
        return;
    if (target < start || target - start >= range)
        return;
    if (ci.has_aug_data)
        p += uleb(&p);
    cfa_state st = {0}, initial;
    if (run_cfa(ci.insns, ci.end, start, UINTPTR_MAX, &ci, &st, &st, hdr) < 0)
        return;
    initial = st;
    if (run_cfa(p, end, start, target, &ci, &st, &initial, hdr) < 0)
        return;
    if (st.ra_undefined) {
        r->kind = RULE_END;
        return;
    }
    if (st.cfa_expr || (st.cfa_reg != DWREG_RSP && st.cfa_reg != DWREG_RBP) || !st.ra_saved ||
        st.ra_off != -8 || st.cfa_off < 8 || st.cfa_off > INT32_MAX || st.bp_off < INT16_MIN ||
        st.bp_off > INT16_MAX)
        return;
    r->cfa_reg = (uint8_t)st.cfa_reg;
    r->cfa_off = (int32_t)st.cfa_off;
    r->bp_off = (int16_t)st.bp_off;
    r->kind = RULE_OK;
}

/* ---- the walk ------------------------------------------------------------ */

static const cfi_rule *rule_for(cfi_rule *cache, uintptr_t ra, int uncached)
{
    cfi_rule *r = &cache[(ra ^ (ra >> CACHE_BITS)) & (CACHE_SIZE - 1)];
    if (MT_LIKELY(r->pc == ra) && MT_LIKELY(!uncached))
        return r;
    cfi_rule fresh = {.pc = ra};
    compute_rule(ra, &fresh);
    *r = fresh;
    return r;
}

/* A walk's memo (per thread, MEMO_SETS sets of two after the rule cache,
 * so a few call sites whose starts fall in one set do not evict each
 * other at every call):
 * where it started, every stack word it read and what it read there, and
 * the site its frames gave. A walk from the same pc and sp (and rbp, when
 * a rule used the rbp it started with) that finds the same words in the
 * same places would take the same steps to the same frames, so the site
 * is known without them. Kept only for a walk on the thread's own stack
 * that read at most MEMO_READS words and gave a site with no second walk
 * (mt_site_from_stack's). A shard, and so its memos, may pass to a new
 * thread: a memo is only used on a stack with the same top. */
#define MEMO_SETS 8u
#define MEMO_READS 24 /* about 16 frames deep (depth 16 and less) */
typedef struct cfi_memo {
    uintptr_t pc, sp, bp, hi; /* hi: the stack's top when it was kept */
    uint32_t key;             /* memo_key(cat, ask); 0: empty */
    uint32_t site;
    int32_t nread; /* -1: too many to keep */
    int16_t uses_bp;
    int16_t next; /* in a set's first memo: the one to replace next (the
                     store below writes field by field, leaving it be) */
    uintptr_t at[MEMO_READS], val[MEMO_READS];
} cfi_memo;

static size_t cache_bytes(void)
{
    return sizeof(cfi_rule) * CACHE_SIZE + sizeof(cfi_memo) * 2 * MEMO_SETS;
}

/* This thread's rules and memos, emptied when code was unloaded since;
 * NULL without a shard or memory. *uncached: a dlclose is under way, so
 * neither may be read (they may be of code unmapped since; what is put in
 * them now is forgotten at its end). Read before the generation: a window
 * that closed since is seen as the generation it bumped. */
static __attribute__((noinline)) cfi_rule *new_cache(mt_shard *sh)
{
    void *m =
        mmap(NULL, cache_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? NULL : (sh->cfi_cache = m);
}

static MT_INLINE cfi_rule *thread_cache(int *uncached)
{
    *uncached = atomic_load_explicit(&mt_unloading, memory_order_acquire) != 0;
    mt_shard *sh = mt_my_shard();
    if (MT_UNLIKELY(!sh))
        return NULL;
    cfi_rule *cache = sh->cfi_cache;
    if (MT_UNLIKELY(!cache) && !(cache = new_cache(sh)))
        return NULL;
    unsigned gen = atomic_load_explicit(&mt_code_gen, memory_order_acquire);
    if (MT_UNLIKELY(gen != sh->cfi_gen)) { /* code was unloaded: any cached rule may be stale */
        memset(cache, 0, cache_bytes());
        sh->cfi_gen = gen;
    }
    return cache;
}

/* The set of a walk's start: two memos. */
static inline cfi_memo *memo_set(cfi_rule *cache, uintptr_t pc, uintptr_t sp)
{
    uint64_t h = ((uint64_t)pc ^ ((uint64_t)sp << 7)) * 0x9E3779B97F4A7C15ull;
    return (cfi_memo *)(cache + CACHE_SIZE) + 2 * ((h >> 60) % MEMO_SETS);
}

static inline uint32_t memo_key(unsigned cat, int ask)
{
    return 1u << 31 | (uint32_t)ask << 8 | (cat & 0xff);
}

static inline void memo_read(cfi_memo *m, uintptr_t at, uintptr_t val)
{
    if (m->nread >= 0 && m->nread < MEMO_READS) {
        m->at[m->nread] = at;
        m->val[m->nread++] = val;
    } else {
        m->nread = -1;
    }
}

/* The walk; `m` (may be NULL, and is on any stack but the thread's own:
 * mt_cfi_site's site_off_stack) learns what it read. */
static int walk(cfi_rule *cache, int uncached, uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *out,
                int max, cfi_memo *m)
{
    /* The stack the walk may read: this thread's, or the signal stack a
     * handler runs on (its frames up to the signal frame); on any other
     * (a coroutine's), nothing beyond the first frame. */
    uintptr_t hi;
    int own = mt_site_on_stack(sp);
    if (own) {
        hi = mt_t.stack_hi;
    } else {
        stack_t ss;
        if (sigaltstack(NULL, &ss) != 0 || (ss.ss_flags & SS_DISABLE) ||
            sp - (uintptr_t)ss.ss_sp >= ss.ss_size) {
            if (max < 1 || pc < 4096)
                return 0;
            out[0] = pc;
            return 1;
        }
        hi = (uintptr_t)ss.ss_sp + ss.ss_size;
    }
    /* What the result depends on: a saved rbp the walk read counts only
     * once a rule takes its CFA from it (code without frame pointers keeps
     * any value in rbp); the rbp it began with, likewise. */
    int n = 0, first_bp = 1, bp_pending = 0;
    uintptr_t bp_at = 0;
    while (n < max) {
        if (pc < 4096)
            break;
        out[n++] = pc;
        const cfi_rule *r = rule_for(cache, pc, uncached);
        if (r->kind == RULE_END)
            break;
        if (r->kind != RULE_OK)
            return own ? -1 : n;
        if (m && r->cfa_reg != DWREG_RSP) {
            if (first_bp)
                m->uses_bp = 1;
            else if (bp_pending)
                memo_read(m, bp_at, bp);
            bp_pending = 0;
        }
        uintptr_t cfa = (r->cfa_reg == DWREG_RSP ? sp : bp) + (intptr_t)r->cfa_off;
        if (cfa <= sp || cfa > hi || (cfa & 7))
            return own ? -1 : n;
        uintptr_t next_pc = *(const uintptr_t *)(cfa - 8);
        if (m)
            memo_read(m, cfa - 8, next_pc);
        if (r->bp_off) {
            uintptr_t at = cfa + (intptr_t)r->bp_off;
            if (at < sp || at > hi - 8)
                return own ? -1 : n;
            bp = *(const uintptr_t *)at;
            first_bp = 0;
            bp_pending = 1;
            bp_at = at;
        }
        sp = cfa;
        pc = next_pc;
    }
    return n;
}

int mt_cfi_walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t *out, int max)
{
    int uncached;
    cfi_rule *cache = thread_cache(&uncached);
    return cache ? walk(cache, uncached, pc, sp, bp, out, max, NULL) : -1;
}

/* mt_cfi_site off the thread's own stack (a signal handler's alternate
 * stack, a coroutine's): no memo, and no room taken for one. */
static __attribute__((noinline)) uint32_t site_off_stack(cfi_rule *cache, int uncached, unsigned cat, int ask,
                                                         const uintptr_t *frame, uintptr_t *pcs)
{
    int n = walk(cache, uncached, frame[1], (uintptr_t)(frame + 2), frame[0], pcs, ask, NULL);
    return n < 0 ? MT_CFI_NO_WALK : mt_site_from_stack(cat, pcs, n, ask, NULL);
}

uint32_t mt_cfi_site(unsigned cat, int ask, const uintptr_t *frame, uintptr_t *pcs)
{
    uintptr_t pc = frame[1], sp = (uintptr_t)(frame + 2), bp = frame[0];
    int uncached;
    cfi_rule *cache = thread_cache(&uncached);
    if (MT_UNLIKELY(!cache))
        return MT_CFI_NO_WALK;
    if (MT_UNLIKELY(!mt_site_on_stack(sp)))
        return site_off_stack(cache, uncached, cat, ask, frame, pcs);
    uint32_t key = memo_key(cat, ask);
    cfi_memo *set = memo_set(cache, pc, sp);
    /* Same start, on this thread's stack with the same top (the words it
     * read lie between sp and that top: there to read again), same words:
     * same site. None while a dlclose is under way. */
    for (int w = 0; w < 2 && MT_LIKELY(!uncached); w++) {
        cfi_memo *m = &set[w];
        if (m->key == key && m->pc == pc && m->sp == sp && m->hi == mt_t.stack_hi &&
            (!m->uses_bp || m->bp == bp)) {
            int i = 0;
            while (i < m->nread && *(const uintptr_t *)m->at[i] == m->val[i])
                i++;
            if (i == m->nread) {
                if ((set[0].next & 1) == w) /* the other goes next */
                    set[0].next = (int16_t)(w ^ 1);
                return m->site;
            }
        }
    }
    cfi_memo fresh;
    fresh.nread = 0;
    fresh.uses_bp = 0;
    int n = walk(cache, uncached, pc, sp, bp, pcs, ask, &fresh);
    if (n < 0)
        return MT_CFI_NO_WALK;
    int again = 0;
    uint32_t site = mt_site_from_stack(cat, pcs, n, ask, &again);
    /* The caller holds mt_t.in_agent: no capture on this thread (a signal
     * handler's) meets the memo half written. A fork while it is (from
     * another thread) leaves it keyless in the child: the key goes last. */
    if (fresh.nread >= 0 && !again && site != 0) {
        cfi_memo *m = &set[set[0].next & 1];
        set[0].next ^= 1;
        m->key = 0;
        __asm__ volatile("" ::: "memory");
        m->pc = pc;
        m->sp = sp;
        m->bp = bp;
        m->hi = mt_t.stack_hi;
        m->site = site;
        m->nread = fresh.nread;
        m->uses_bp = fresh.uses_bp;
        memcpy(m->at, fresh.at, (size_t)fresh.nread * sizeof *m->at);
        memcpy(m->val, fresh.val, (size_t)fresh.nread * sizeof *m->val);
        __asm__ volatile("" ::: "memory");
        m->key = key;
    }
    return site;
}

/* dlclose may unmap code whose rules are cached, and dlopen put other
 * code at the same addresses: every cache starts afresh after one. */
MT_EXPORT int dlclose(void *handle)
{
    static int (*real_dlclose)(void *);
    if (!real_dlclose) {
        mt_agent_enter();
        real_dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
        mt_agent_leave();
    }
    mt_t.dlclose_depth++;
    atomic_fetch_add(&mt_unloading, 1);
    mt_site_wait_linked_walks(); /* a fork child's lock-free listing of the loaded objects */
    int rc = real_dlclose ? real_dlclose(handle) : -1;
    int saved = errno;
    atomic_fetch_add_explicit(&mt_code_gen, 1, memory_order_release);
    mt_site_flush_unwind_caches(); /* libunwind's, for its step loop (mt_site_unw) */
    if (rc == 0)
        mt_modules_after_dlclose(); /* what went, and the sites made through it */
    atomic_fetch_sub(&mt_unloading, 1);
    mt_t.dlclose_depth--;
    errno = saved;
    return rc;
}
