/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "route.h"

int route_socket_open(void) {
        /* The kernel answers at once; a lost answer must not hold the proxy's loop for every
         * sandbox: after 200 ms route_is_local() fails and the connection is refused. */
        static const struct timeval timeout = { .tv_usec = 200 * 1000 };
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

        if (fd < 0)
                return -errno;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

int route_is_local(int fd, const EgressAddress *address) {
        static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        static unsigned seq;
        EgressAddress unmapped;
        const EgressAddress *a = address;
        struct {
                struct nlmsghdr nh;
                struct rtmsg rt;
                char attrs[RTA_SPACE(16)];
        } req = {};
        union {
                struct nlmsghdr nh;
                char buf[8192];
        } reply;
        size_t len;
        struct rtattr *rta;
        ssize_t n;

        /* An AF_INET6 socket connects to ::ffff:a.b.c.d over IPv4: the IPv4 route is the
         * one that counts (the IPv6 table has none for it, or a default one). */
        if (a->family == AF_INET6 && memcmp(a->bytes, v4_mapped, sizeof(v4_mapped)) == 0) {
                unmapped = (EgressAddress) { .family = AF_INET };
                memcpy(unmapped.bytes, a->bytes + 12, 4);
                a = &unmapped;
        }
        /* connect() takes :: for ::1 (the IPv6 table routes it as any other address). */
        if (a->family == AF_INET6 && memcmp(a->bytes, (const uint8_t[16]) {}, 16) == 0)
                return 1;
        len = a->family == AF_INET ? 4 : 16;
        req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg)) + RTA_SPACE(len);
        req.nh.nlmsg_type = RTM_GETROUTE;
        req.nh.nlmsg_flags = NLM_F_REQUEST;
        req.nh.nlmsg_seq = ++seq;
        req.rt.rtm_family = (unsigned char) a->family;
        req.rt.rtm_dst_len = (unsigned char) (len * 8);
        rta = (struct rtattr *) ((char *) &req + NLMSG_ALIGN(req.nh.nlmsg_len) - RTA_SPACE(len));
        rta->rta_type = RTA_DST;
        rta->rta_len = (unsigned short) RTA_LENGTH(len);
        memcpy(RTA_DATA(rta), a->bytes, len);

        if (send(fd, &req, req.nh.nlmsg_len, 0) < 0)
                return -errno;
        for (;;) {
                n = recv(fd, &reply, sizeof(reply), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                for (struct nlmsghdr *h = &reply.nh; NLMSG_OK(h, (size_t) n); h = NLMSG_NEXT(h, n)) {
                        if (h->nlmsg_seq != seq)
                                continue;  /* an answer to an earlier question that timed out */
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                /* No route at all: nothing here either. */
                                if (e->error == -ENETUNREACH || e->error == -EHOSTUNREACH)
                                        return 0;
                                return e->error < 0 ? e->error : -EIO;
                        }
                        if (h->nlmsg_type == RTM_NEWROUTE) {
                                const struct rtmsg *rt = NLMSG_DATA(h);
                                return rt->rtm_type == RTN_LOCAL || rt->rtm_type == RTN_BROADCAST;
                        }
                }
        }
}
