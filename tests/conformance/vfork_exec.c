/* vfork + exec and posix_spawn: the child (this program again, with
 * --child) uses the inherited TCP and UDP sockets, including a TCP socket
 * that posix_spawn moved to fd 100 with a dup2 file action. */
#include "common.h"

#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

enum { kSpawnFd = 100 };

/* argv = --child TAG TCP_FD UDP_FD UDP_PORT */
static int child_main(char** argv) {
  ct_start("vfork_exec child");
  const char* tag = argv[2];
  int tcp = atoi(argv[3]), udp = atoi(argv[4]);
  struct sockaddr_in to = ct_addr((uint16_t)atoi(argv[5]));
  ct_out("child %s: started", tag);
  CT_RC("child: send on inherited tcp", send(tcp, tag, strlen(tag), 0), (long)strlen(tag));
  char buf[8];
  ct_wait_readable(tcp);
  CT_RC("child: recv on inherited tcp", recv(tcp, buf, sizeof buf, 0), 2);
  CT_RC("child: sendto on inherited udp", sendto(udp, tag, strlen(tag), 0, (struct sockaddr*)&to, sizeof to),
        (long)strlen(tag));
  return 0;
}

/* Serves one child: silent until it exits (it prints too), then reports. */
static void serve_child(pid_t pid, const char* tag, int server, int peer) {
  size_t len = strlen(tag);
  char buf[16];
  ct_recv_all(server, buf, len);
  int tag_ok = memcmp(buf, tag, len) == 0;
  ct_send_all(server, "ok", 2);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) CT_FAIL("waitpid: %s", ct_errname(errno));
  CT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited 0");
  CT_CHECK(tag_ok, "parent got the child's tag on tcp");
  ct_wait_readable(peer);
  CT_RC("parent recv the child's datagram", recv(peer, buf, sizeof buf, 0), (long)len);
}

int main(int argc, char** argv) {
  if (argc == 6 && strcmp(argv[1], "--child") == 0) return child_main(argv);
  ct_start("vfork_exec");
  int client, server;
  ct_tcp_pair(&client, &server);
  struct sockaddr_in peer_addr;
  int udp = ct_udp_bound(NULL);
  int peer = ct_udp_bound(&peer_addr);
  char tcp_arg[16], udp_arg[16], port_arg[16], spawn_arg[16];
  snprintf(tcp_arg, sizeof tcp_arg, "%d", client);
  snprintf(udp_arg, sizeof udp_arg, "%d", udp);
  snprintf(port_arg, sizeof port_arg, "%u", (unsigned)ntohs(peer_addr.sin_port));
  snprintf(spawn_arg, sizeof spawn_arg, "%d", kSpawnFd);

  char* vfork_args[] = {"vfork_exec", "--child", "vfork", tcp_arg, udp_arg, port_arg, NULL};
  pid_t pid = vfork();
  if (pid < 0) CT_FAIL("vfork: %s", ct_errname(errno));
  if (pid == 0) {
    execv("/proc/self/exe", vfork_args);
    _exit(127);
  }
  serve_child(pid, "vfork", server, peer);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, client, kSpawnFd);
  char* spawn_args[] = {"vfork_exec", "--child", "spawn", spawn_arg, udp_arg, port_arg, NULL};
  /* Silent until the child exits: it prints too. */
  int rc = posix_spawn(&pid, "/proc/self/exe", &actions, NULL, spawn_args, environ);
  if (rc != 0) CT_FAIL("posix_spawn: %s", ct_errname(rc));
  posix_spawn_file_actions_destroy(&actions);
  serve_child(pid, "spawn", server, peer);

  CT_RC("parent send after the children", send(client, "end", 3, 0), 3);
  char buf[4];
  ct_recv_all(server, buf, 3);
  ct_out("check: parent tcp still works");
  close(client);
  close(server);
  close(udp);
  close(peer);
  return 0;
}
