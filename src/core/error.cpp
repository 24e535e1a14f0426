#include "vsa/error.hpp"

#include <utility>

namespace vsa {
namespace {

const char* kind_prefix(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument: return "vsa: invalid argument";
    case ErrorKind::unsupported: return "vsa: unsupported";
    case ErrorKind::runtime: return "vsa: runtime error";
  }
  return "vsa: error";
}

std::string compose(ErrorKind kind, const std::string& argument, const std::string& expected,
                    const std::string& got) {
  return std::string(kind_prefix(kind)) + " '" + argument + "': expected " + expected + ", got " +
         got;
}

}  // namespace

Error::Error(ErrorKind kind, std::string argument, std::string expected, std::string got)
    : std::runtime_error(compose(kind, argument, expected, got)),
      kind_(kind),
      argument_(std::move(argument)),
      expected_(std::move(expected)),
      got_(std::move(got)) {}

Error::Error(ErrorKind kind, std::string message)
    : std::runtime_error(std::string(kind_prefix(kind)) + ": " + message), kind_(kind) {}

}  // namespace vsa
