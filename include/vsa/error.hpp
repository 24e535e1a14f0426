// The one exception type of the library. Every failed check names the
// argument, what was expected and what was given.
#pragma once

#include <stdexcept>
#include <string>

namespace vsa {

enum class ErrorKind {
  invalid_argument,  // the caller passed something that breaks the contract
  unsupported,       // valid input, but no backend here can run it (dtype, arch, ...)
  runtime,           // a device or system call failed
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string argument, std::string expected, std::string got);
  // For runtime failures that have no argument (e.g. a CUDA launch error).
  Error(ErrorKind kind, std::string message);

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& argument() const noexcept { return argument_; }
  const std::string& expected() const noexcept { return expected_; }
  const std::string& got() const noexcept { return got_; }

 private:
  ErrorKind kind_;
  std::string argument_;
  std::string expected_;
  std::string got_;
};

}  // namespace vsa
