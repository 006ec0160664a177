// plugin.cc — the shared library of the detail-report tests: an exported
// C++ function (so its name needs demangling) that captures the stack where
// it stands, as the agent would at a malloc call inside a library.
#include <execinfo.h>

namespace plugin
{
__attribute__((noinline)) int capture(void **frames, int max)
{
    int n = backtrace(frames, max);
    __asm__ volatile("" ::: "memory"); // keep the call from being a tail call
    return n;
}
} // namespace plugin

extern "C" int plugin_capture(void **frames, int max)
{
    int n = plugin::capture(frames, max);
    __asm__ volatile("" ::: "memory");
    return n;
}
