/* xe_event.c — the event vocabulary (field and type names, the derived
 * size class), the host's category names, and the engine's named
 * anonymous mappings (xe.h "events" and "memory"). */
#include "xe/xe.h"
#include "xe/xe_util.h"

#include <sys/mman.h>
#include <sys/prctl.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif

static const char *const field_names[XE_F_NFIELDS] = {
    [XE_F_TYPE] = "type",
    [XE_F_CATEGORY] = "category",
    [XE_F_SIZE] = "size",
    [XE_F_ADDRESS] = "address",
    [XE_F_OLD_ADDRESS] = "old_address",
    [XE_F_SITE] = "site",
    [XE_F_KEY] = "key",
    [XE_F_VALUE] = "value",
    [XE_F_TID] = "tid",
    [XE_F_CPU] = "cpu",
    [XE_F_DATA_LEN] = "data_len",
    [XE_F_SIZE_CLASS] = "size_class",
};

static const char *const type_names[XE_EV_NTYPES] = {
    [XE_EV_USER] = "user",
    [XE_EV_ALLOC] = "alloc",
    [XE_EV_FREE] = "free",
    [XE_EV_REALLOC] = "realloc",
    [XE_EV_MMAP] = "mmap",
    [XE_EV_MUNMAP] = "munmap",
    [XE_EV_SPAN_BEGIN] = "span_begin",
    [XE_EV_SPAN_END] = "span_end",
    [XE_EV_SNAPSHOT] = "snapshot",
    [XE_EV_PAGE_REF] = "page_ref",
};

uint64_t xe_event_field(const xe_event *ev, enum xe_field f)
{
    return xe_field_get(ev, (unsigned)f);
}

static int name_index(const char *const *names, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++) {
        if (xe_name_eq(names[i], name, len))
            return i;
    }
    return -1;
}

int xe_field_by_name(const char *name, size_t len)
{
    return name_index(field_names, XE_F_NFIELDS, name, len);
}

/* "unknown" rather than NULL so callers can print the result directly. */
const char *xe_field_name(enum xe_field f)
{
    return (unsigned)f < XE_F_NFIELDS ? field_names[f] : "unknown";
}

int xe_type_by_name(const char *name, size_t len)
{
    return name_index(type_names, XE_EV_NTYPES, name, len);
}

const char *xe_type_name(unsigned type)
{
    return type < XE_EV_NTYPES ? type_names[type] : "unknown";
}

/* Set once by the agent (or a test) before sessions run; read from signal
 * handlers, hence an atomic pointer rather than a copy. */
static const xe_host *host;

void xe_set_host(const xe_host *h)
{
    __atomic_store_n(&host, h, __ATOMIC_RELEASE);
}

const char *xe_category_name(unsigned id)
{
    const xe_host *h = __atomic_load_n(&host, __ATOMIC_ACQUIRE);
    return h && h->category_name ? h->category_name(id) : NULL;
}

int xe_category_id(const char *name, size_t len)
{
    const xe_host *h = __atomic_load_n(&host, __ATOMIC_ACQUIRE);
    return h && h->category_id ? h->category_id(name, len) : -1;
}

void *xe_map(size_t bytes)
{
    if (bytes == 0)
        return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* Names the mapping in /proc/PID/maps so the engine's memory is
     * recognisable; kernels before 5.17 (or without CONFIG_ANON_VMA_NAME)
     * refuse, which costs nothing but the name. */
    (void)prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, (unsigned long)bytes,
                (unsigned long)"memtrail-xe");
    return p;
}

void xe_unmap(void *p, size_t bytes)
{
    if (p && bytes)
        munmap(p, bytes);
}
