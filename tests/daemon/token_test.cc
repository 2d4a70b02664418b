#include "daemon/token.h"

#include <gtest/gtest.h>

namespace cclo::daemon {
namespace {

TEST(TokenTest, RoundTrips) {
  CommToken token = NewToken("10.1.2.3:7470");
  absl::StatusOr<CommToken> parsed = ParseToken(FormatToken(token));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->id, token.id);
  EXPECT_EQ(parsed->secret, token.secret);
  EXPECT_EQ(parsed->root_address, "10.1.2.3:7470");
}

TEST(TokenTest, FreshTokensDiffer) {
  EXPECT_NE(NewToken("a:1").id, NewToken("a:1").id);
  EXPECT_NE(NewToken("a:1").secret, NewToken("a:1").secret);
}

struct BadToken {
  std::string text;
  std::string error;
};

class MalformedTokenTest : public ::testing::TestWithParam<BadToken> {};

TEST_P(MalformedTokenTest, IsRejectedWithReason) {
  absl::StatusOr<CommToken> parsed = ParseToken(GetParam().text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find(GetParam().error), std::string::npos) << parsed.status();
}

const std::string kId(32, 'a');
const std::string kSecret(64, 'b');

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedTokenTest,
    ::testing::Values(BadToken{"", "does not start with"}, BadToken{"hello", "does not start with"},
                      BadToken{"cclo2-" + kId + "-" + kSecret + "-h:1", "unsupported version"},
                      BadToken{"cclo1-" + kId + "-" + kSecret, "expected 32 hex digits"},
                      BadToken{"cclo1-" + kId + "x" + kSecret + "-h:1", "expected 32 hex"},
                      BadToken{"cclo1-" + std::string(31, 'a') + "g-" + kSecret + "-h:1",
                               "communicator id: 'ag' at position 30 is not hex"},
                      BadToken{"cclo1-" + kId + "-" + std::string(63, 'b') + "z-h:1",
                               "secret is not hex"},
                      BadToken{"cclo1-" + kId + "-" + kSecret + "-hostonly", "is not host:port"},
                      BadToken{"cclo1-" + kId + "-" + kSecret + "-h:12x", "is not host:port"},
                      BadToken{"cclo1-" + kId + "-" + kSecret + "-:80", "is not host:port"},
                      BadToken{"cclo1-" + kId + "-" + kSecret + "-h\nx:80", "'h\\nx:80' is not"},
                      BadToken{"cclo1-" + kId + "-" + kSecret + "-h x:80", "is not host:port"},
                      BadToken{"cclo1-" + kId + "-" + kSecret + "-h:0", "is not host:port"},
                      BadToken{"cclo1-" + kId + "-" + kSecret + "-h:65536", "is not host:port"},
                      BadToken{"cclo1-" + kId + "-" + kSecret + "-" + std::string(300, 'h') + ":1",
                               "address of 302 bytes is longer than 300"}));

TEST(TokenTest, ErrorNeverEchoesTheSecret) {
  std::string secret = std::string(63, 'c') + "z";
  absl::StatusOr<CommToken> parsed = ParseToken("cclo1-" + kId + "-" + secret + "-h:1");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message().find("ccccc"), std::string::npos) << parsed.status();
}

}  // namespace
}  // namespace cclo::daemon
