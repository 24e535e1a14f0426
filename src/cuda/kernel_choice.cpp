#include "cuda/kernel_choice.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "vsa/error.hpp"

namespace vsa::cuda {
namespace {

// VSA_HAS_SM90A is defined by CMake when VSA_CUDA_ARCHS names 90a.
constexpr bool kBuiltWithSm90a =
#ifdef VSA_HAS_SM90A
    true;
#else
    false;
#endif

// An environment override's value as a positive whole number up to `most`, or 0 when it is not
// one (a sign, spaces, other characters, zero, or more than `most`).
unsigned long long positive_whole_number(const char* text, unsigned long long most) {
  if (text[0] < '0' || text[0] > '9') return 0;  // strtoull would skip spaces and take a sign
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  return *end != '\0' || errno == ERANGE || value > most ? 0 : value;
}

}  // namespace

bool arch_in_build(int compute_capability, const std::string& archs) {
  const int major = compute_capability / 10;
  for (std::size_t start = 0; start < archs.size();) {
    const std::size_t stop = std::min(archs.find_first_of(",;", start), archs.size());
    const std::string entry = archs.substr(start, stop - start);  // "90a-real", "120-virtual", "80", ...
    start = stop + 1;
    const std::size_t digits = entry.find_first_not_of("0123456789");
    if (digits == 0 || entry.empty()) continue;
    const int arch = std::stoi(entry.substr(0, digits));
    const std::string rest = digits == std::string::npos ? "" : entry.substr(digits);
    const char variant = !rest.empty() && (rest[0] == 'a' || rest[0] == 'f') ? rest[0] : '\0';
    const std::string kind = rest.substr(variant ? 1 : 0);
    const bool later_minor = major == arch / 10 && compute_capability >= arch;
    const bool runs = variant == 'a'   ? compute_capability == arch
                      : variant == 'f' ? later_minor
                                       : (kind != "-virtual" && later_minor) || (kind != "-real" && compute_capability >= arch);
    if (runs) return true;
  }
  return false;
}

const char* kernel_family_name(KernelFamily k) {
  switch (k) {
    case KernelFamily::sm90: return "sm90";
    case KernelFamily::sm90_ws: return "sm90ws";
    case KernelFamily::sm90_v1: return "sm90v1";
    case KernelFamily::sm80: break;
  }
  return "sm80";
}

KernelFamily kernel_family_for(int compute_capability) {
  const bool sm90_runs = kBuiltWithSm90a && compute_capability == 90;
  const char* requested = std::getenv("VSA_CUDA_KERNEL");
  if (requested == nullptr || requested[0] == '\0') return sm90_runs ? KernelFamily::sm90 : KernelFamily::sm80;
  if (std::strcmp(requested, "sm80") == 0) return KernelFamily::sm80;
  for (const KernelFamily hopper : {KernelFamily::sm90, KernelFamily::sm90_ws, KernelFamily::sm90_v1}) {
    if (std::strcmp(requested, kernel_family_name(hopper)) != 0) continue;
    if (sm90_runs) return hopper;
    throw Error(ErrorKind::unsupported, "VSA_CUDA_KERNEL", "a kernel this device and build can run",
                std::string(requested) + " on compute capability " + std::to_string(compute_capability) +
                    (kBuiltWithSm90a ? "" : " (this build has no sm_90a code)"));
  }
  throw Error(ErrorKind::invalid_argument, "VSA_CUDA_KERNEL", "sm80, sm90, sm90ws or sm90v1 (or unset)", requested);
}

DqMethod dq_method_for(KernelFamily family, bool deterministic, int head_dim) {
  const char* requested = std::getenv("VSA_CUDA_DQ");
  const bool any = requested == nullptr || requested[0] == '\0';
  const bool atomic = !any && std::strcmp(requested, "atomic") == 0;
  const bool stored = !any && std::strcmp(requested, "stored") == 0;
  if (!any && !atomic && !stored)
    throw Error(ErrorKind::invalid_argument, "VSA_CUDA_DQ", "atomic or stored (or unset)", requested);
  if (deterministic) return DqMethod::stored_ds;
  if (atomic || (any && (!is_hopper(family) || head_dim != 128))) return DqMethod::atomic;
  return DqMethod::stored_ds;
}

std::size_t stored_ds_cap_bytes() {
  constexpr std::size_t kDefaultMb = 4096, kMb = std::size_t{1} << 20;
  const char* requested = std::getenv("VSA_CUDA_DS_WORKSPACE_MB");
  if (requested == nullptr || requested[0] == '\0') return kDefaultMb * kMb;
  // Megabytes whose bytes fit size_t (more would wrap to a smaller cap).
  const unsigned long long mb = positive_whole_number(requested, std::numeric_limits<std::size_t>::max() / kMb);
  if (mb == 0)
    throw Error(ErrorKind::invalid_argument, "VSA_CUDA_DS_WORKSPACE_MB", "a positive whole number of megabytes",
                requested);
  return static_cast<std::size_t>(mb) * kMb;
}

std::int64_t list_entries_cap() {
  const char* requested = std::getenv("VSA_CUDA_LIST_ENTRIES");
  if (requested == nullptr || requested[0] == '\0') return kMaxListEntries;
  const unsigned long long entries = positive_whole_number(requested, kMaxListEntries);
  if (entries == 0)
    throw Error(ErrorKind::invalid_argument, "VSA_CUDA_LIST_ENTRIES", "a whole number in [1, 2^31 - 1]", requested);
  return static_cast<std::int64_t>(entries);
}

WalkPhase walk_phase_for(std::size_t slice_bytes, std::size_t l2_bytes, int sm_count, std::int64_t waves) {
  constexpr std::int64_t kMinWaves = 8;
  constexpr WalkPhase kListOrder{0, 0};
  const WalkPhase phased{sm_count, kWalkRampWaves};
  const char* requested = std::getenv("VSA_CUDA_WALK_PHASE");
  if (requested == nullptr || requested[0] == '\0')
    return slice_bytes > l2_bytes / 2 && waves >= kMinWaves ? phased : kListOrder;
  if (std::strcmp(requested, "off") == 0) return kListOrder;
  if (std::strcmp(requested, "on") == 0) return phased;
  const unsigned long long sms = positive_whole_number(requested, 4096);
  if (sms == 0)
    throw Error(ErrorKind::invalid_argument, "VSA_CUDA_WALK_PHASE", "off, on or a number of SMs in [1, 4096]",
                requested);
  return {static_cast<int>(sms), 0};
}

}  // namespace vsa::cuda
