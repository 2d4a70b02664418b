#include "client/run/options.h"
#include "gtest/gtest.h"

namespace cclo::run {
namespace {

RunArguments ValidArguments() {
  RunArguments arguments;
  arguments.runtime_dir = "/run/cclod";
  arguments.token = "token";
  arguments.rank = 1;
  arguments.size = 3;
  return arguments;
}

// The error message of validating `arguments`, or "ok".
std::string Problem(const RunArguments& arguments) {
  absl::StatusOr<RunOptions> options = ValidateRunArguments(arguments);
  if (options.ok()) return "ok";
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(options.status().message());
}

TEST(RunOptionsTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("1K"), 1024u);
  EXPECT_EQ(*ParseByteSize("64k"), 65536u);
  EXPECT_EQ(*ParseByteSize("16M"), 16u << 20);
  EXPECT_EQ(*ParseByteSize("2G"), uint64_t{2} << 30);
  for (const char* bad : {"", "K", "1.5K", "-1", "1KB", "1T", " 1", "18446744073709551615K"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
  EXPECT_EQ(ParseByteSize("3X").status().message(),
            "'3X' is not a byte size (digits with an optional K, M or G)");
  EXPECT_EQ(*ParseByteSizes("1K,64K,1M,16M"),
            (std::vector<uint64_t>{1024, 65536, 1 << 20, 16 << 20}));
  EXPECT_FALSE(ParseByteSizes("1K,,2K").ok());
}

TEST(RunOptionsTest, Ops) {
  EXPECT_EQ(*ParseOps("allreduce,sendrecv,bcast"),
            (std::vector<Op>{Op::kAllreduce, Op::kSendRecv, Op::kBcast}));
  EXPECT_EQ(ParseOps("bcast,reduce").status().message(),
            "--ops: 'reduce' is not one of sendrecv, bcast, allreduce");
}

TEST(RunOptionsTest, ValidArgumentsBecomeOptions) {
  RunArguments arguments = ValidArguments();
  arguments.sizes = "0,8,1K";
  arguments.datatype = "int64";
  arguments.reduce_op = "max";
  arguments.iters = 3;
  arguments.root = 2;
  arguments.op_timeout_seconds = 1.5;
  absl::StatusOr<RunOptions> options = ValidateRunArguments(arguments);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->rank, 1u);
  EXPECT_EQ(options->size, 3u);
  EXPECT_EQ(options->ops, (std::vector<Op>{Op::kSendRecv, Op::kBcast, Op::kAllreduce}));
  EXPECT_EQ(options->sizes, (std::vector<uint64_t>{0, 8, 1024}));
  EXPECT_EQ(options->datatype, hw::DataType::kInt64);
  EXPECT_EQ(options->reduce_op, hw::ReduceOp::kMax);
  EXPECT_EQ(options->iters, 3u);
  EXPECT_EQ(options->root, 2u);
  EXPECT_EQ(options->op_timeout, absl::Milliseconds(1500));
}

TEST(RunOptionsTest, SizesRoundDownToWholeElements) {
  RunArguments arguments = ValidArguments();
  arguments.sizes = "7,1K,1026,3";
  EXPECT_EQ(ValidateRunArguments(arguments)->sizes, (std::vector<uint64_t>{4, 1024, 1024, 0}));
  arguments.datatype = "float64";
  EXPECT_EQ(ValidateRunArguments(arguments)->sizes, (std::vector<uint64_t>{0, 1024, 1024, 0}));
}

TEST(RunOptionsTest, EachBadArgumentIsNamedWithItsValue) {
  RunArguments arguments = ValidArguments();
  EXPECT_EQ(Problem(arguments), "ok");
  arguments.rank = 3;
  EXPECT_EQ(Problem(arguments), "--rank: 3 is not in [0, 3) for --size 3");
  arguments = ValidArguments();
  arguments.size = 0;
  EXPECT_EQ(Problem(arguments), "--size: 0 is not a world size (1 or more)");
  arguments = ValidArguments();
  arguments.root = -1;
  EXPECT_EQ(Problem(arguments), "--root: -1 is not in [0, 3) for --size 3");
  arguments = ValidArguments();
  arguments.iters = 0;
  EXPECT_EQ(Problem(arguments), "--iters: 0 is not 1 or more");
  arguments = ValidArguments();
  arguments.datatype = "float16";
  EXPECT_EQ(Problem(arguments),
            "--datatype: 'float16' is not one of int32, int64, float32, float64");
  arguments = ValidArguments();
  arguments.reduce_op = "prod";
  EXPECT_EQ(Problem(arguments), "--reduce-op: 'prod' is not one of sum, max, min");
  arguments = ValidArguments();
  arguments.sizes = "1Q";
  EXPECT_EQ(Problem(arguments),
            "--sizes: '1Q' is not a byte size (digits with an optional K, M or G)");
  arguments = ValidArguments();
  arguments.size = 1;
  arguments.rank = 0;
  EXPECT_EQ(Problem(arguments),
            "--ops: sendrecv needs --size 2 or more (a rank does not send to itself)");
  arguments.ops = "bcast,allreduce";
  EXPECT_EQ(Problem(arguments), "ok");
  arguments = ValidArguments();
  arguments.token = "";
  EXPECT_EQ(Problem(arguments), "--token: is required");
  arguments = ValidArguments();
  arguments.join_timeout_seconds = 0;
  EXPECT_EQ(Problem(arguments), "--join-timeout: 0 is not a positive number of seconds");
}

}  // namespace
}  // namespace cclo::run
