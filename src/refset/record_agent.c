/* record_agent.c — the agent's messages (refset_agent.h), one datagram
 * each, read from the recorder's end of the socket pair. A message that is
 * not whole or does not carry the magic is dropped: the agent's word is an
 * addition to what perf and pagemap tell, never needed. */
#include "refset/record.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int rec_agent_drain(int fd, rec_batch *b)
{
    for (;;) {
        mt_rs_agent_msg m;
        ssize_t n = recv(fd, &m, sizeof m, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        if (n == 0)
            return -1; /* every sender has closed its end */
        if ((size_t)n < MT_RS_AGENT_MSG_SIZE(0) || m.magic != MT_RS_AGENT_MAGIC ||
            m.nframes > MT_RS_AGENT_MAX_FRAMES || (size_t)n < MT_RS_AGENT_MSG_SIZE(m.nframes))
            continue;
        rec_item *it = rec_batch_add(b);
        if (!it)
            return 0;
        it->kind = REC_IT_AGENT;
        it->time = m.time_ns;
        it->pid = m.pid;
        it->tid = m.tid;
        it->ag = malloc(sizeof m);
        if (!it->ag) {
            b->n--;
            return 0;
        }
        memcpy(it->ag, &m, (size_t)n);
    }
}
