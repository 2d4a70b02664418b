#include "daemon/tenants.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "absl/synchronization/notification.h"
#include "hw/clock.h"

namespace cclo::daemon {
namespace {

/// A user database from a table: uid -> name, name -> groups.
class FakeUsers final : public UserDatabase {
 public:
  std::string UserName(uid_t uid) const override {
    auto found = names.find(uid);
    return found == names.end() ? "" : found->second;
  }
  std::vector<std::string> GroupNames(const std::string& user, gid_t) const override {
    auto found = groups.find(user);
    return found == groups.end() ? std::vector<std::string>{} : found->second;
  }
  std::map<uid_t, std::string> names;
  std::map<std::string, std::vector<std::string>> groups;
};

Config TwoTenants() {
  Config config;
  config.tenants = {TenantConfig{.name = "ml", .users = {"alice"}, .groups = {"gpu"}},
                    TenantConfig{.name = "batch", .uids = {2000}, .weight = 4},
                    TenantConfig{.name = "default"}};
  return config;
}

TEST(TenantStoreTest, MatchesByUidUserAndGroupInConfigOrder) {
  FakeUsers users;
  users.names = {{1000, "alice"}, {1001, "bob"}, {2000, "carol"}, {3000, "dave"}};
  users.groups = {{"bob", {"bob", "gpu"}}, {"carol", {"gpu"}}};
  TenantStore store(TwoTenants(), users);
  EXPECT_EQ((*store.Identify(1000, 1000))->name(), "ml");  // by user
  EXPECT_EQ((*store.Identify(1001, 1001))->name(), "ml");  // by group
  EXPECT_EQ((*store.Identify(2000, 2000))->name(), "ml");  // group matches first
  EXPECT_EQ((*store.Identify(3000, 3000))->name(), "default");
  EXPECT_EQ((*store.Identify(4000, 4000))->name(), "default");  // no name at all
}

TEST(TenantStoreTest, UidMatchesWhenEarlierTenantsDoNot) {
  FakeUsers users;
  users.names = {{2000, "carol"}};
  TenantStore store(TwoTenants(), users);
  absl::StatusOr<TenantPtr> tenant = store.Identify(2000, 2000);
  ASSERT_TRUE(tenant.ok());
  EXPECT_EQ((*tenant)->name(), "batch");
  EXPECT_EQ((*tenant)->weight(), 4u);
  EXPECT_EQ((*tenant)->index(), 1u);
}

TEST(TenantStoreTest, UnknownCallerIsRefusedWithoutDefault) {
  FakeUsers users;
  users.names = {{3000, "dave"}};
  Config config = TwoTenants();
  config.default_tenant = "";
  TenantStore store(config, users);
  absl::StatusOr<TenantPtr> tenant = store.Identify(3000, 3000);
  ASSERT_FALSE(tenant.ok());
  EXPECT_EQ(tenant.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(tenant.status().message(),
            "uid 3000 (user dave) belongs to no tenant of this daemon, and it refuses unknown "
            "callers");
}

TEST(TenantTest, OverQuotaNamesQuotaLimitAndUseAndLeasesGiveBack) {
  TenantConfig config{.name = "ml"};
  config.quotas.buffer_bytes = 100;
  auto tenant = std::make_shared<Tenant>(0, config);
  absl::StatusOr<Lease> first = tenant->Acquire(Resource::kBufferBytes, 60);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<Lease> second = tenant->Acquire(Resource::kBufferBytes, 41);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(second.status().message(),
            "tenant 'ml' quota buffer_bytes: limit 100, in use 60, asked for 41");
  EXPECT_EQ(tenant->Refusals()[static_cast<size_t>(Resource::kBufferBytes)], 1u);
  absl::StatusOr<Lease> exact = tenant->Acquire(Resource::kBufferBytes, 40);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(tenant->Usage()[static_cast<size_t>(Resource::kBufferBytes)], 100u);
  { Lease moved = *std::move(first); }
  EXPECT_EQ(tenant->Usage()[static_cast<size_t>(Resource::kBufferBytes)], 40u);
  exact->Release();
  exact->Release();  // once only
  EXPECT_EQ(tenant->Usage()[static_cast<size_t>(Resource::kBufferBytes)], 0u);
}

TEST(TenantTest, WaitingAcquireGetsRoomWhenALeaseEnds) {
  TenantConfig config{.name = "ml"};
  config.quotas.inflight_ops = 1;
  auto tenant = std::make_shared<Tenant>(0, config);
  absl::StatusOr<Lease> held = tenant->Acquire(Resource::kInflightOps, 1);
  ASSERT_TRUE(held.ok());
  std::thread releaser([&held] {
    absl::SleepFor(absl::Milliseconds(50));
    held->Release();
  });
  absl::StatusOr<Lease> waited =
      tenant->Acquire(Resource::kInflightOps, 1, hw::SteadyNow() + absl::Seconds(30));
  releaser.join();
  EXPECT_TRUE(waited.ok()) << waited.status();
}

// Room that comes after the waiter's caller left is not taken: the caller would never
// learn it holds it.
TEST(TenantTest, RoomThatComesAfterTheWaiterLeftIsNotTaken) {
  TenantConfig config{.name = "ml"};
  config.quotas.inflight_ops = 1;
  auto tenant = std::make_shared<Tenant>(0, config);
  absl::StatusOr<Lease> held = tenant->Acquire(Resource::kInflightOps, 1);
  ASSERT_TRUE(held.ok());
  absl::Notification waiting, left;
  auto still_wanted = [&]() -> absl::Status {
    if (!waiting.HasBeenNotified()) waiting.Notify();
    if (left.HasBeenNotified()) return absl::CancelledError("the caller left");
    return absl::OkStatus();
  };
  absl::StatusOr<Lease> waited;
  std::thread waiter([&] {
    waited = tenant->Acquire(Resource::kInflightOps, 1, hw::SteadyNow() + absl::Seconds(30),
                             still_wanted);
  });
  waiting.WaitForNotification();  // asked once: it waits
  left.Notify();
  held->Release();
  waiter.join();
  EXPECT_EQ(waited.status(), absl::CancelledError("the caller left"));
  EXPECT_EQ(tenant->Usage()[static_cast<size_t>(Resource::kInflightOps)], 0u);
}

TEST(TenantTest, WaitingAcquireEndsAtItsDeadline) {
  TenantConfig config{.name = "ml"};
  config.quotas.inflight_ops = 0;
  auto tenant = std::make_shared<Tenant>(0, config);
  absl::StatusOr<Lease> waited =
      tenant->Acquire(Resource::kInflightOps, 1, hw::SteadyNow() + absl::Milliseconds(20));
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().message(),
            "tenant 'ml' quota inflight_ops: limit 0, in use 0, asked for 1");
}

TEST(TenantTest, ReloadKeepsWhatIsHeld) {
  TenantConfig config{.name = "ml"};
  auto tenant = std::make_shared<Tenant>(0, config);
  absl::StatusOr<Lease> held = tenant->Acquire(Resource::kSessions, 3);
  ASSERT_TRUE(held.ok());
  config.quotas.sessions = 2;
  config.weight = 7;
  tenant->Update(config);
  EXPECT_EQ(tenant->weight(), 7u);
  EXPECT_EQ(tenant->Usage()[static_cast<size_t>(Resource::kSessions)], 3u);
  EXPECT_FALSE(tenant->Acquire(Resource::kSessions, 1).ok());
  held->Release();
  EXPECT_TRUE(tenant->Acquire(Resource::kSessions, 1).ok());
}

// The name is the one the tenant was made with, whatever an update says (the store refuses
// renames), and it is read without the lock updates take.
TEST(TenantTest, NameStaysWhileUpdatesRun) {
  auto tenant = std::make_shared<Tenant>(0, TenantConfig{.name = "ml"});
  tenant->Update(TenantConfig{.name = "renamed", .weight = 2});
  EXPECT_EQ(tenant->name(), "ml");
  EXPECT_EQ(tenant->weight(), 2u);
  std::atomic<bool> done = false;
  std::thread reloading([&] {
    for (int i = 0; !done; ++i) tenant->Update(TenantConfig{.name = i % 2 ? "ml" : "renamed"});
  });
  int other_names = 0;
  for (int i = 0; i < 100'000; ++i) other_names += tenant->name() != "ml";
  done = true;
  reloading.join();
  EXPECT_EQ(other_names, 0);
}

// A lookup answering ERANGE gets a bigger buffer, doubled up to 1 MiB: an entry needing
// 100000 bytes (a group of thousands of members) is found in 128 KiB.
TEST(SystemUsersTest, ALookUpShortOfRoomIsRetriedInABiggerBuffer) {
  std::vector<size_t> sizes;
  std::vector<char> buffer;
  const int found = LookUpWithRoom(buffer, [&](char* text, size_t size) {
    sizes.push_back(size);
    if (size < 100'000) return ERANGE;
    std::strcpy(text, "ml");
    return 0;
  });
  EXPECT_EQ(found, 0);
  EXPECT_EQ(sizes, (std::vector<size_t>{16384, 32768, 65536, 131072}));
  EXPECT_STREQ(buffer.data(), "ml");

  sizes.clear();
  EXPECT_EQ(LookUpWithRoom(buffer,
                           [&](char*, size_t size) {
                             sizes.push_back(size);
                             return ERANGE;
                           }),
            ERANGE);
  EXPECT_EQ(sizes, (std::vector<size_t>{131072, 262144, 524288, 1048576}));
}

TEST(SystemUsersTest, KnowsRoot) {
  EXPECT_EQ(SystemUsers().UserName(0), "root");
  std::vector<std::string> groups = SystemUsers().GroupNames("root", 0);
  EXPECT_NE(std::find(groups.begin(), groups.end(), "root"), groups.end());
}

}  // namespace
}  // namespace cclo::daemon
