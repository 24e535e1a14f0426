// An environment variable set (or, with a null value, unset) for the
// lifetime of the object; the value the process had comes back after, so a
// run of the whole binary under, say, VSA_CUDA_KERNEL=sm80 keeps it.
#pragma once

#include <cstdlib>
#include <string>

namespace vsa::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* before = std::getenv(name);
    had_value_ = before != nullptr;
    if (had_value_) saved_ = before;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (had_value_)
      setenv(name_.c_str(), saved_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  bool had_value_ = false;
  std::string saved_;
};

}  // namespace vsa::test
