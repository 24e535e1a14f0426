// Asserting that a call fails with a vsa::Error about a given argument.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <vsa/error.hpp>

#include "support/host_tensor.hpp"

namespace vsa::test {

template <class Call>
void expect_error_on(const std::string& argument, Call&& call) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one about '" << argument << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

// Runs `call`, which must fail naming `argument` as sharing memory with
// `other` (an invalid argument), and leave the bytes of every tensor in
// `tensors` as they were.
inline void expect_refused_as_shared(const std::string& argument, const std::string& other,
                                     const std::vector<const HostTensor*>& tensors,
                                     const std::function<void()>& call) {
  SCOPED_TRACE(argument + " over " + other);
  std::vector<HostTensor> before;
  for (const HostTensor* t : tensors) before.push_back(*t);
  try {
    call();
    ADD_FAILURE() << "no error; expected '" << argument << "' sharing memory with '" << other << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
    EXPECT_EQ(e.argument(), argument) << e.what();
    const std::string tail = " with " + other;
    EXPECT_TRUE(e.got().size() >= tail.size() &&
                e.got().compare(e.got().size() - tail.size(), tail.size(), tail) == 0)
        << e.what();
  }
  for (std::size_t i = 0; i < tensors.size(); ++i)
    EXPECT_TRUE(tensors[i]->same_bytes(before[i])) << "tensor " << i << " written by a refused call";
}

}  // namespace vsa::test
