// Asserting that a call fails with a vsa::Error about a given argument.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <vsa/error.hpp>

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

}  // namespace vsa::test
