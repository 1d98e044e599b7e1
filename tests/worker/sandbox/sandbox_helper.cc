// The "hostile" program of sandbox_test.cc: `sandbox_helper MODE [ARGS...]`.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, std::strerror(errno));
  return 3;
}

void WriteAll(int fd, const std::string& data) {
  for (size_t at = 0; at < data.size();) {
    const ssize_t n = write(fd, data.data() + at, data.size() - at);
    if (n <= 0) _exit(4);
    at += static_cast<size_t>(n);
  }
}

// Forks a grandchild in a session of its own that rewrites `beat` in the
// working directory every 50 ms; returns once the first beat is written.
void Escape() {
  const pid_t child = fork();
  if (child == 0) {
    setsid();
    if (fork() != 0) _exit(0);
    for (long beat = 0;; ++beat) {
      const int fd = open("beat.tmp", O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const std::string text = std::to_string(beat);
      if (fd >= 0) {
        WriteAll(fd, text);
        close(fd);
        rename("beat.tmp", "beat");
      }
      usleep(50000);
    }
  }
  while (access("beat", F_OK) != 0) usleep(10000);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  const char* arg = argc > 2 ? argv[2] : "";
  if (mode == "exit") return std::atoi(arg);
  if (mode == "segv") {
    volatile int* nowhere = nullptr;
    *nowhere = 1;
  }
  if (mode == "raise") raise(std::atoi(arg));
  if (mode == "abort") std::abort();
  if (mode == "busy-past-sigxcpu") signal(SIGXCPU, SIG_IGN);  // then SIGKILL at the hard limit
  if (mode == "busy" || mode == "busy-past-sigxcpu") {
    for (volatile unsigned long i = 0;; ++i) {
    }
  }
  if (mode == "connect") {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return Fail("socket");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(std::atoi(arg)));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return Fail("connect");
    std::puts("connected");
    return 0;
  }
  if (mode == "unix-dgram") {  // a datagram UNIX socket (could send to host daemons' sockets)
    return socket(AF_UNIX, SOCK_DGRAM, 0) < 0 ? Fail("socket") : 0;
  }
  if (mode == "write") {
    const int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return Fail("open");
    WriteAll(fd, "written\n");
    return close(fd) == 0 ? 0 : Fail("close");
  }
  if (mode == "read") {
    const int fd = open(arg, O_RDONLY);
    if (fd < 0) return Fail("open");
    char buffer[256];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0) return Fail("read");
    WriteAll(1, std::string(buffer, static_cast<size_t>(n)));
    return 0;
  }
  if (mode == "escape") {  // leaves a grandchild behind, then exits
    Escape();
    return 0;
  }
  if (mode == "escape-and-hang") {  // leaves a grandchild behind, then sleeps
    Escape();
    for (;;) pause();
  }
  if (mode == "flood") {  // forever on standard output (arg "2": standard error)
    const int fd = std::atoi(arg) == 2 ? 2 : 1;
    const std::string line(1000, 'x');
    for (;;) WriteAll(fd, line);
  }
  if (mode == "both") {  // arg bytes to standard error first, then to standard output
    const std::string data(static_cast<size_t>(std::atol(arg)), 'e');
    WriteAll(2, data);
    WriteAll(1, std::string(data.size(), 'o'));
    return 0;
  }
  if (mode == "processes") {  // what making a process, leaving its group and making a thread gave
    const pid_t child = fork();
    if (child == 0) _exit(0);
    if (child > 0) waitpid(child, nullptr, 0);
    std::printf("fork: %s\n", child < 0 ? std::strerror(errno) : "ok");
    std::printf("setsid: %s\n", setsid() < 0 ? std::strerror(errno) : "ok");
    bool ran = false;
    std::thread([&] { ran = true; }).join();
    std::printf("thread: %s\n", ran ? "ok" : "did not run");
    return 0;
  }
  if (mode == "count") {  // writes its counter's address to `address`, then counts forever
    static volatile unsigned long counter = 0;
    const std::string address = std::to_string(reinterpret_cast<unsigned long>(&counter));
    const int fd = open("address.tmp", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return Fail("open");
    WriteAll(fd, address);
    close(fd);
    rename("address.tmp", "address");
    for (;;) counter = counter + 1;
  }
  if (mode == "fds") {  // its open descriptors, e.g. "0 1 2"
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return Fail("opendir");
    std::string list;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.' || std::atoi(entry->d_name) == dirfd(dir)) continue;
      list += (list.empty() ? "" : " ") + std::string(entry->d_name);
    }
    closedir(dir);
    std::puts(list.c_str());
    return 0;
  }
  return 2;
}
