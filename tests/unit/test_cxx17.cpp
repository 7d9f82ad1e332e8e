// The C++ layer from a C++17 client (a PyTorch extension builds with what
// libtorch requires): it compiles, and call sites are still the caller's.
#include <string>

#include <gtest/gtest.h>

#include "npurt/npurt.hpp"

static_assert(__cplusplus < 202002L, "this file must be compiled as C++17");

namespace {

npurt::SourceLocation where(npurt::SourceLocation loc = npurt::SourceLocation::current())
{
	return loc;
}

}  // namespace

TEST(Cxx17Header, CallSitesAreTheCallersLine)
{
	npurt::SourceLocation loc = where();
	EXPECT_EQ(loc.line(), static_cast<unsigned>(__LINE__ - 1));
	EXPECT_NE(std::string(loc.file_name()).find("test_cxx17.cpp"), std::string::npos)
	        << loc.file_name();
	// GoogleTest's body of this test.
	EXPECT_NE(std::string(loc.function_name()).find("TestBody"), std::string::npos)
	        << loc.function_name();
}
