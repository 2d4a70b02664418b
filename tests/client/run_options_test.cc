#include "absl/strings/str_cat.h"
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
  EXPECT_EQ(*hw::ParseByteSize("0"), 0u);
  EXPECT_EQ(*hw::ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*hw::ParseByteSize("1K"), 1024u);
  EXPECT_EQ(*hw::ParseByteSize("64k"), 65536u);
  EXPECT_EQ(*hw::ParseByteSize("16M"), 16u << 20);
  EXPECT_EQ(*hw::ParseByteSize("2G"), uint64_t{2} << 30);
  for (const char* bad : {"", "K", "1.5K", "-1", "1KB", "1T", " 1", "18446744073709551615K"}) {
    EXPECT_FALSE(hw::ParseByteSize(bad).ok()) << bad;
  }
  EXPECT_EQ(hw::ParseByteSize("3X").status().message(),
            "'3X' is not a byte size (digits with an optional K, M or G)");
  EXPECT_EQ(*ParseByteSizes("1K,64K,1M,16M"),
            (std::vector<uint64_t>{1024, 65536, 1 << 20, 16 << 20}));
  EXPECT_FALSE(ParseByteSizes("1K,,2K").ok());
}

TEST(RunOptionsTest, Ops) {
  EXPECT_EQ(*ParseOps("allreduce,sendrecv,bcast"),
            (std::vector<Op>{Op::kAllreduce, Op::kSendRecv, Op::kBcast}));
  EXPECT_EQ(*ParseOps("reduce_scatter,barrier"),
            (std::vector<Op>{Op::kReduceScatter, Op::kBarrier}));
  EXPECT_EQ(ParseOps("bcast,reduce-scatter").status().message(),
            "--ops: 'reduce-scatter' is not one of sendrecv, bcast, scatter, gather, allgather, "
            "reduce, allreduce, reduce_scatter, alltoall, barrier");
  const std::vector<Op> all = *ParseOps("all");
  ASSERT_EQ(all.size(), 10u);
  EXPECT_EQ(all.front(), Op::kSendRecv);
  EXPECT_EQ(all.back(), Op::kBarrier);
  for (Op op : all) {
    EXPECT_EQ(*ParseOps(OpName(op)), std::vector<Op>{op});
    if (op != Op::kSendRecv) {
      EXPECT_EQ(hw::CollectiveName(CollectiveOf(op)), OpName(op));
    }
  }
}

TEST(RunOptionsTest, Roots) {
  EXPECT_EQ(*ParseRoots("2", 3), std::vector<uint32_t>{2});
  EXPECT_EQ(*ParseRoots("all", 3), (std::vector<uint32_t>{0, 1, 2}));
  for (const char* bad : {"3", "-1", "", "x", "1,2"}) {
    EXPECT_EQ(ParseRoots(bad, 3).status().message(),
              absl::StrCat("--root: '", bad, "' is not a rank in [0, 3) for --size 3 or 'all'"));
  }
}

TEST(RunOptionsTest, EveryDatatypeIsAccepted) {
  for (const char* name :
       {"int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"}) {
    RunArguments arguments = ValidArguments();
    arguments.datatype = name;
    absl::StatusOr<RunOptions> options = ValidateRunArguments(arguments);
    ASSERT_TRUE(options.ok()) << name << ": " << options.status();
    ASSERT_EQ(options->datatypes.size(), 1u);
    EXPECT_EQ(hw::DataTypeName(options->datatypes[0]), name);
  }
}

TEST(RunOptionsTest, DatatypeLists) {
  EXPECT_EQ(*ParseDataTypes("float32,int32,float16"),
            (std::vector<hw::DataType>{hw::DataType::kFloat32, hw::DataType::kInt32,
                                       hw::DataType::kFloat16}));
  EXPECT_EQ(ParseDataTypes("float32,,int32").status().message(),
            "--datatype: '' is not one of int8, uint8, int32, int64, float16, bfloat16, float32, "
            "float64");
  // The half-precision limit holds for each datatype of a list.
  RunArguments arguments = ValidArguments();
  arguments.datatype = "int32,bfloat16";
  arguments.size = 9;
  arguments.rank = 0;
  EXPECT_EQ(Problem(arguments),
            "--datatype: bfloat16 sums over 9 ranks may exceed 256, beyond which bfloat16 misses "
            "integers; use at most 8 ranks or --reduce-op max or min");
  arguments.datatype = "int32,float16";
  EXPECT_EQ(ValidateRunArguments(arguments)->datatypes,
            (std::vector<hw::DataType>{hw::DataType::kInt32, hw::DataType::kFloat16}));
}

TEST(RunOptionsTest, HalfPrecisionSumsMustStayExact) {
  // Pattern values reach 30 in magnitude: bfloat16 holds every integer up to 256 only.
  RunArguments arguments = ValidArguments();
  arguments.datatype = "bfloat16";
  arguments.size = 9;
  arguments.rank = 0;
  EXPECT_EQ(Problem(arguments),
            "--datatype: bfloat16 sums over 9 ranks may exceed 256, beyond which bfloat16 misses "
            "integers; use at most 8 ranks or --reduce-op max or min");
  arguments.reduce_op = "max";
  EXPECT_EQ(Problem(arguments), "ok");
  arguments.reduce_op = "sum";
  arguments.ops = "sendrecv,bcast,alltoall";  // nothing sums
  EXPECT_EQ(Problem(arguments), "ok");
  arguments.ops = "reduce_scatter";
  arguments.size = 8;
  EXPECT_EQ(Problem(arguments), "ok");
  arguments.datatype = "float16";
  arguments.size = 69;
  EXPECT_EQ(Problem(arguments),
            "--datatype: float16 sums over 69 ranks may exceed 2048, beyond which float16 misses "
            "integers; use at most 68 ranks or --reduce-op max or min");
  arguments.datatype = "int8";  // integers wrap, in the reference as in the engine
  EXPECT_EQ(Problem(arguments), "ok");
}

TEST(RunOptionsTest, ValidArgumentsBecomeOptions) {
  RunArguments arguments = ValidArguments();
  arguments.sizes = "0,8,1K";
  arguments.datatype = "int64";
  arguments.reduce_op = "max";
  arguments.iters = 3;
  arguments.root = "2";
  arguments.in_place = true;
  arguments.op_timeout_seconds = 1.5;
  absl::StatusOr<RunOptions> options = ValidateRunArguments(arguments);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->rank, 1u);
  EXPECT_EQ(options->size, 3u);
  EXPECT_EQ(options->ops, (std::vector<Op>{Op::kSendRecv, Op::kBcast, Op::kAllreduce}));
  EXPECT_EQ(options->sizes, (std::vector<uint64_t>{0, 8, 1024}));
  EXPECT_EQ(options->datatypes, std::vector<hw::DataType>{hw::DataType::kInt64});
  EXPECT_EQ(options->reduce_op, hw::ReduceOp::kMax);
  EXPECT_EQ(options->iters, 3u);
  EXPECT_EQ(options->roots, std::vector<uint32_t>{2});
  EXPECT_TRUE(options->in_place);
  EXPECT_EQ(options->op_timeout, absl::Milliseconds(1500));
}

TEST(RunOptionsTest, SizesRoundDownToWholeElementsOfEachDatatype) {
  RunArguments arguments = ValidArguments();
  arguments.sizes = "7,1K,1026,3";
  arguments.datatype = "float32,float64";
  const RunOptions options = *ValidateRunArguments(arguments);
  EXPECT_EQ(options.sizes, (std::vector<uint64_t>{7, 1024, 1026, 3}));
  EXPECT_EQ(SizesOf(options, Op::kAllreduce, hw::DataType::kFloat32),
            (std::vector<uint64_t>{4, 1024, 1024, 0}));
  EXPECT_EQ(SizesOf(options, Op::kAllreduce, hw::DataType::kFloat64),
            (std::vector<uint64_t>{0, 1024, 1024, 0}));
  EXPECT_EQ(SizesOf(options, Op::kBarrier, hw::DataType::kFloat32), std::vector<uint64_t>{0});
}

TEST(RunOptionsTest, RootedOpsRunWithEveryRoot) {
  RunArguments arguments = ValidArguments();
  arguments.root = "all";
  const RunOptions options = *ValidateRunArguments(arguments);
  EXPECT_EQ(RootsOf(options, Op::kGather), (std::vector<std::optional<uint32_t>>{0u, 1u, 2u}));
  EXPECT_EQ(RootsOf(options, Op::kAllgather), std::vector<std::optional<uint32_t>>{std::nullopt});
  EXPECT_EQ(RootsOf(options, Op::kSendRecv), std::vector<std::optional<uint32_t>>{std::nullopt});
}

TEST(RunOptionsTest, AlgorithmsOfEachOp) {
  RunArguments arguments = ValidArguments();
  RunOptions options = *ValidateRunArguments(arguments);
  EXPECT_EQ(AlgorithmsOf(options, Op::kAllreduce), std::vector<std::string>{""});
  options.algorithm = "ring";  // forced on every op but sendrecv
  EXPECT_EQ(AlgorithmsOf(options, Op::kAllreduce), std::vector<std::string>{"ring"});
  EXPECT_EQ(AlgorithmsOf(options, Op::kSendRecv), std::vector<std::string>{""});
  options.algorithm = kEveryAlgorithm;
  EXPECT_EQ(AlgorithmsOf(options, Op::kAllreduce),
            (std::vector<std::string>{"ring", "recursive_doubling", "reduce_bcast"}));
  EXPECT_EQ(AlgorithmsOf(options, Op::kSendRecv), std::vector<std::string>{"direct"});
  EXPECT_EQ(AlgorithmsOf(options, Op::kBarrier), std::vector<std::string>{"dissemination"});
  const std::vector<Op> every_op = *ParseOps("all");
  for (Op op : every_op) EXPECT_FALSE(AlgorithmsOf(options, op).empty()) << OpName(op);
}

TEST(RunOptionsTest, EachBadArgumentIsNamedWithItsValue) {
  RunArguments arguments = ValidArguments();
  EXPECT_EQ(Problem(arguments), "ok");
  arguments.rank = 3;
  EXPECT_EQ(Problem(arguments), "--rank: 3 is not in [0, 3) for --size 3");
  arguments = ValidArguments();
  arguments.size = 0;
  EXPECT_EQ(Problem(arguments), "--size: 0 is not a world size (1 to 4294967295)");
  arguments.size = 4294967296;  // said "(1 or more)", which it is
  EXPECT_EQ(Problem(arguments), "--size: 4294967296 is not a world size (1 to 4294967295)");
  arguments = ValidArguments();
  arguments.root = "3";
  EXPECT_EQ(Problem(arguments), "--root: '3' is not a rank in [0, 3) for --size 3 or 'all'");
  arguments = ValidArguments();
  arguments.iters = 0;
  EXPECT_EQ(Problem(arguments), "--iters: 0 is not 1 to 4294967295");
  arguments.iters = 4294967296;
  EXPECT_EQ(Problem(arguments), "--iters: 4294967296 is not 1 to 4294967295");
  arguments = ValidArguments();
  arguments.datatype = "complex64";
  EXPECT_EQ(Problem(arguments),
            "--datatype: 'complex64' is not one of int8, uint8, int32, int64, float16, bfloat16, "
            "float32, float64");
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
}

}  // namespace
}  // namespace cclo::run
