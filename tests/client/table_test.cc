#include "client/table.h"

#include "gtest/gtest.h"

namespace cclo::client {
namespace {

TEST(TableTest, ColumnsAlignToTheWidestCell) {
  EXPECT_EQ(RenderTable({"op", "bytes"}, {{"allreduce", "1"}, {"bcast", "1048576"}}),
            "op         bytes\n"
            "allreduce  1\n"
            "bcast      1048576\n");
}

TEST(TableTest, ShortRowsLeaveCellsEmptyAndNoRowsGiveTheHeader) {
  EXPECT_EQ(RenderTable({"a", "b", "c"}, {{"x"}}), "a  b  c\nx\n");
  EXPECT_EQ(RenderTable({"id", "state"}, {}), "id  state\n");
}

TEST(TableTest, ControlCharactersAreShownEscaped) {
  EXPECT_EQ(RenderTable({"id", "error"}, {{"1", "peer said\nhi \x1b[31mred\x7f"}, {"2", "ok"}}),
            "id  error\n"
            "1   peer said\\nhi \\x1b[31mred\\x7f\n"
            "2   ok\n");
}

TEST(TableTest, LongCellsAreShownInFull) {
  const std::string error(1000, 'e');
  EXPECT_EQ(RenderTable({"id", "error"}, {{"1", error}}), "id  error\n1   " + error + "\n");
}

}  // namespace
}  // namespace cclo::client
