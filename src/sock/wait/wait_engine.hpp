// The wait engine (DESIGN decision 6): poll, select and epoll over fds of
// every kind, where a managed socket's readiness comes from the socket
// (managed_socket.hpp: a TCP connection's TCP bytes before the switch
// point and its ring after it; a UDP socket's kernel queue and its UD
// queue) and every other fd's from the kernel.
//
// A wait that involves no managed socket is the kernel's call, unchanged.
// Otherwise: look at every fd (managed sockets progress their transports),
// return what is ready; else sleep in the real ppoll on the kernel fds and
// what each managed socket says may wake it (its kernel fd, armed
// completion channels) — in slices, since an upgrade under way can change
// readiness without any fd saying so — and look again. Timeouts and
// sigmasks are the caller's; a signal ends the wait with EINTR as the
// kernel's would.
#pragma once
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

namespace vsock::sock {

// ppoll() semantics; timeout null = forever. Returns the real call's
// result when no fd in the set is a managed socket.
int wait_poll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask);

// Whether any fd in the sets is a managed socket or an epoll fd the
// library serves (else select is the kernel's call, unchanged).
bool select_has_managed(int nfds, const fd_set* readfds, const fd_set* writefds, const fd_set* exceptfds);
// pselect() semantics through wait_poll, for sets select_has_managed()
// accepted (select's timeout form is converted by the caller).
int wait_select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, const timespec* timeout,
                const sigset_t* mask);

// epoll (epoll_view.hpp): the library's view of an epoll set holds the
// upgradable TCP sockets and the epoll fds registered in it; the rest stays
// in the kernel's set. epoll_created(): a new epoll fd (its view).
void epoll_created(int epfd);
int epoll_control(int epfd, int op, int fd, epoll_event* event);
int epoll_wait_all(int epfd, epoll_event* events, int max, const timespec* timeout, const sigset_t* mask);
// Whether the library serves waits on epfd (else epoll_wait is the
// kernel's call): it held an upgradable socket or an epoll fd.
bool epoll_has_view(int epfd);
// An fd (or a range) was closed: if it was an epoll fd, forget its view.
void epoll_forget(int fd);
// `fd` is about to be closed: a dup keeps registrations alive (as orphans).
void epoll_closing(int fd);
void epoll_forget_range(unsigned int first, unsigned int last);

}  // namespace vsock::sock
