// hw::EscapeControl: text from another process, escaped and bounded for logs. hw::ReadTextFile:
// a file's whole text, or why it cannot be read.
#include "hw/types.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace cclo::hw {
namespace {

TEST(EscapeControlTest, WritesControlCharactersAsEscapes) {
  EXPECT_EQ(EscapeControl("10.0.0.9:1\n[warning] \x1b[2J\x7f \"quoted\" \xc3\xbc"),
            "10.0.0.9:1\\n[warning] \\x1b[2J\\x7f \"quoted\" \xc3\xbc");
}

TEST(EscapeControlTest, CutsLongTextSayingHowLongItWas) {
  const std::string fits(kMaxEscapedBytes, 'a');
  EXPECT_EQ(EscapeControl(fits), fits);
  EXPECT_EQ(EscapeControl(std::string(1 << 20, 'a')), fits + "... (1048576 bytes in all)");
  // The bound is on the text taken, whatever its escapes add.
  EXPECT_EQ(EscapeControl(std::string(300, '\n'), 2), "\\n\\n... (300 bytes in all)");
  EXPECT_EQ(EscapeControl("abcdef", 0), "... (6 bytes in all)");
}

TEST(EscapeControlTest, CutsBeforeAUtf8CharacterThatDoesNotFit) {
  const std::string start(kMaxEscapedBytes - 1, 'a');
  // U+2713 (3 bytes) from the last byte kept on.
  EXPECT_EQ(EscapeControl(start + "\xe2\x9c\x93 and more"),
            start + "... (" + std::to_string(start.size() + 12) + " bytes in all)");
  // Bytes that are not UTF-8 move the cut back by 3 at most.
  const std::string ascii(kMaxEscapedBytes - 6, 'a');
  EXPECT_EQ(EscapeControl(ascii + std::string(10, '\x80')),
            ascii + "\\x80\\x80\\x80... (" + std::to_string(ascii.size() + 10) + " bytes in all)");
}

TEST(EscapeControlTest, WritesBytesThatAreNotUtf8AsEscapes) {
  // A Latin-1 word, a character cut short, a surrogate: a proto's string field cannot hold
  // them (a reload's reason quoting them made `ccloctl status` fail).
  EXPECT_EQ(EscapeControl("caf\xe9 \xe2\x9c \xed\xa0\x80 \xe2\x9c\x93"),
            "caf\\xe9 \\xe2\\x9c \\xed\\xa0\\x80 \xe2\x9c\x93");
}

TEST(EscapeControlTest, KeepsAllWhenToldTo) {
  const std::string long_text(1 << 20, 'a');
  EXPECT_EQ(EscapeControl(long_text, std::string_view::npos), long_text);
}

TEST(ReadTextFileTest, ReadsTheWholeFileAndNamesWhyItCannot) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string path = dir + "/text";
  const std::string text(10'000, 'x');  // more than one read
  std::ofstream(path) << text;
  absl::StatusOr<std::string> read = ReadTextFile("test file", path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, text);
  // A directory is no empty file.
  EXPECT_EQ(ReadTextFile("test file", dir).status(),
            absl::NotFoundError("cannot read test file " + dir + ": Is a directory"));
  EXPECT_EQ(
      ReadTextFile("test file", dir + "/none").status(),
      absl::NotFoundError("cannot read test file " + dir + "/none: No such file or directory"));
}

// What is not a regular file of bounded length is refused at once: a device that never ends,
// a FIFO that no one writes (its open would wait for a writer), a file past the bound.
TEST(ReadTextFileTest, RefusesWhatIsNotABoundedRegularFile) {
  EXPECT_EQ(ReadTextFile("test file", "/dev/zero").status(),
            absl::NotFoundError("cannot read test file /dev/zero: not a regular file"));
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_EQ(ReadTextFile("test file", fifo).status(),
            absl::NotFoundError("cannot read test file " + fifo + ": not a regular file"));
  const std::string path = dir + "/long";
  std::ofstream(path) << std::string(kMaxTextFileBytes, 'x');
  absl::StatusOr<std::string> longest = ReadTextFile("test file", path);
  ASSERT_TRUE(longest.ok()) << longest.status();
  EXPECT_EQ(longest->size(), kMaxTextFileBytes);
  std::ofstream(path, std::ios::app) << 'x';
  EXPECT_EQ(ReadTextFile("test file", path).status(),
            absl::NotFoundError(absl::StrCat("cannot read test file ", path, ": longer than ",
                                             kMaxTextFileBytes, " bytes")));
}

TEST(CallSignatureTest, CanonicalKeepsOnlyWhatTheCollectiveUses) {
  const CallSignature full{.collective = Collective::kAllreduce,
                           .datatype = DataType::kFloat32,
                           .reduce_op = ReduceOp::kMax,
                           .root = 3};
  EXPECT_EQ(Canonical(full), (CallSignature{.collective = Collective::kAllreduce,
                                            .datatype = DataType::kFloat32,
                                            .reduce_op = ReduceOp::kMax}));
  CallSignature bcast = full;
  bcast.collective = Collective::kBcast;
  EXPECT_EQ(
      Canonical(bcast),
      (CallSignature{.collective = Collective::kBcast, .datatype = DataType::kFloat32, .root = 3}));
  CallSignature recv = full;
  recv.collective = Collective::kRecv;
  EXPECT_EQ(Canonical(recv), CallSignature{.collective = Collective::kSend});
  CallSignature barrier = full;
  barrier.collective = Collective::kBarrier;
  EXPECT_EQ(Canonical(barrier), CallSignature{.collective = Collective::kBarrier});
  EXPECT_EQ(DescribeSignature(Canonical(bcast)), "bcast of float32 from root 3");
  EXPECT_EQ(DescribeSignature(full), "allreduce of float32 (max)");
}

// Every listener pauses on an accept error that leaves the connection queued (the socket
// stays readable), and retries at once only where the call was interrupted, the connection
// went, or none was left.
TEST(PausesAcceptingTest, AllButInterruptedGoneOrNoneLeft) {
  for (int error : {EMFILE, ENFILE, ENOBUFS, ENOMEM, EPERM, EACCES}) {
    EXPECT_TRUE(PausesAccepting(error)) << std::strerror(error);
  }
  for (int error : {EINTR, ECONNABORTED, EAGAIN, EWOULDBLOCK}) {
    EXPECT_FALSE(PausesAccepting(error)) << std::strerror(error);
  }
}

}  // namespace
}  // namespace cclo::hw
