/* loopback_bind: an LD_PRELOAD shim that turns a bind() to the wildcard
 * address (0.0.0.0 or ::) into a bind() to loopback. DynamoDB Local has no
 * listen-address option; with this shim it listens on 127.0.0.1 only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
	static bind_fn real_bind;
	if (!real_bind)
		real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
	if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in a;
		memcpy(&a, addr, sizeof a);
		if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
		}
	} else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 a;
		memcpy(&a, addr, sizeof a);
		if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
			a.sin6_addr = in6addr_loopback;
			return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
		}
	}
	return real_bind(fd, addr, len);
}
