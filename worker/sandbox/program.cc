#include "worker/sandbox/program.h"

#include <dirent.h>
#include <signal.h>
#include <sys/uio.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace frontier::sandbox {
namespace {

// The numeric entries of a /proc folder: processes, or a process's threads.
std::vector<int> NumericEntries(const std::string& folder) {
  std::vector<int> ids;
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return ids;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long id = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && id > 0) ids.push_back(static_cast<int>(id));
  }
  closedir(dir);
  return ids;
}

// The first `count` fields of a /proc stat file after the command name (which
// may hold spaces and parentheses): state, ppid, pgrp, ... Empty when it is gone.
std::vector<std::string> StatFields(const std::string& path, size_t count = 3) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return {};
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::vector<std::string> fields;
  std::string field;
  for (size_t i = close + 1; i < line.size() && fields.size() < count; ++i) {
    if (line[i] == ' ') {
      if (!field.empty()) fields.push_back(std::move(field));
      field.clear();
    } else {
      field += line[i];
    }
  }
  if (!field.empty() && fields.size() < count) fields.push_back(field);
  return fields;
}

std::string Hex(uint64_t address) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

using Copy = ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*, unsigned long, unsigned long);

// `bytes` between `local` and the process's `address`, by process_vm_readv or process_vm_writev.
void Transfer(int pid, uint64_t address, void* local, size_t bytes, Copy copy, const char* verb) {
  for (size_t done = 0; done < bytes;) {
    iovec here{static_cast<char*>(local) + done, bytes - done};
    iovec there{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t n = copy(pid, &here, 1, &there, 1, 0);
    if (n <= 0) {
      throw std::runtime_error(std::string(verb) + " " + std::to_string(bytes) + " bytes at " + Hex(address) +
                               " of process " + std::to_string(pid) + ": " +
                               (n < 0 ? std::strerror(errno) : "nothing moved"));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

Program Program::Find(int process_group) {
  std::vector<std::pair<int, int>> members;  // pid, ppid
  for (int pid : NumericEntries("/proc")) {
    const std::vector<std::string> f = StatFields("/proc/" + std::to_string(pid) + "/stat");
    if (f.size() == 3 && std::stoi(f[2]) == process_group) members.emplace_back(pid, std::stoi(f[1]));
  }
  std::set<int> parents;
  for (const auto& [pid, ppid] : members) parents.insert(ppid);
  std::vector<int> leaves;
  for (const auto& [pid, ppid] : members) {
    if (parents.count(pid) == 0) leaves.push_back(pid);
  }
  if (leaves.size() != 1) {
    throw std::runtime_error("the sandbox's process group " + std::to_string(process_group) + " has " +
                             std::to_string(leaves.size()) + " processes that started none of it, not one");
  }
  return Program(leaves.front());
}

void Program::Stop(double timeout_seconds) const {
  if (kill(pid_, SIGSTOP) != 0) return;  // gone
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  const std::string tasks = "/proc/" + std::to_string(pid_) + "/task/";
  for (;;) {
    bool stopped = true;
    for (int tid : NumericEntries(tasks)) {
      const std::vector<std::string> f = StatFields(tasks + std::to_string(tid) + "/stat");
      if (!f.empty() && f[0] != "T" && f[0] != "t" && f[0] != "Z" && f[0] != "X") stopped = false;
    }
    if (stopped) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("process " + std::to_string(pid_) + " did not stop within " +
                               std::to_string(timeout_seconds) + " s of SIGSTOP");
    }
    const timespec pause{0, 20000};  // 20 us
    nanosleep(&pause, nullptr);
  }
}

void Program::Continue() const { kill(pid_, SIGCONT); }

int64_t Program::MinorFaults() const {
  // minflt is stat's 10th field, the 8th after the command name.
  const std::vector<std::string> f = StatFields("/proc/" + std::to_string(pid_) + "/stat", 8);
  return f.size() == 8 ? std::stoll(f[7]) : -1;
}

void Program::Read(uint64_t address, void* into, size_t bytes) const {
  Transfer(pid_, address, into, bytes, process_vm_readv, "reading");
}

void Program::Write(uint64_t address, const void* from, size_t bytes) const {
  Transfer(pid_, address, const_cast<void*>(from), bytes, process_vm_writev, "writing");
}

}  // namespace frontier::sandbox
