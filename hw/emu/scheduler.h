// The engine's scheduler: shares the engine between tenants (DESIGN 9), unit by unit.
//
// A unit is a bounded piece of engine work (handing one segment to a session, copying or
// reducing at most the quantum of memory), charged its bytes to the tenant of its call.
// Units of one tenant run in the order they were queued.
//
// Fair: weighted deficit round robin (Shreedhar and Varghese, 1995). Tenants with queued
// units take turns in a round, in the order they became busy. A turn adds weight x
// quantum bytes to the tenant's deficit and runs its units while the next one fits in
// the deficit; a tenant whose queue empties leaves the round and its deficit drops to 0.
// Work-conserving: a tenant alone is never held back. So while tenants are busy, tenant t
// gets weight(t) / (sum of weights) of the bytes, and a newly busy tenant's first unit
// waits behind at most one turn of every other tenant (a unit larger than a quantum
// waits for deficit over several rounds).
// FIFO: units in the order they were queued, whoever's.
//
// Cost: O(1) per unit when fair, O(busy tenants) per unit in FIFO. Engine thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>

#include "hw/device.h"

namespace cclo::hw::emu {

class Scheduler {
 public:
  /// `quantum_bytes` (> 0): what a tenant of weight 1 may run per turn.
  explicit Scheduler(uint64_t quantum_bytes);

  /// Replaces the mode and the weights; queued units stay queued.
  void Configure(const Scheduling& scheduling);

  /// Replaces the quantum (> 0) from the next turn on.
  void SetQuantum(uint64_t quantum_bytes) { quantum_bytes_ = std::max<uint64_t>(quantum_bytes, 1); }

  /// Queues `work` for `tenant`, charged `bytes`.
  void Push(uint32_t tenant, uint64_t bytes, std::function<void()> work);

  /// Runs units until the bytes of those run reach `budget` or none is queued; units
  /// may queue more. Returns whether units are still queued.
  bool Run(uint64_t budget);

  bool empty() const { return queued_ == 0; }
  bool fair() const { return scheduling_.fair; }

 private:
  struct Unit {
    uint64_t order = 0;  ///< when it was queued, for FIFO
    uint64_t bytes = 0;
    std::function<void()> work;
  };
  struct Tenant {
    std::deque<Unit> units;
    uint64_t deficit = 0;  ///< bytes it may still run in its current turn
  };

  /// Takes the next unit, the tenant's deficit charged for it. Needs a queued unit.
  Unit NextFair();
  Unit NextFifo();
  uint64_t Weight(uint32_t tenant) const;

  uint64_t quantum_bytes_;
  Scheduling scheduling_;
  std::map<uint32_t, Tenant> tenants_;  ///< only tenants with queued units
  std::deque<uint32_t> round_;          ///< busy tenants, the one whose turn it is first
  bool turn_started_ = false;           ///< round_.front() got its quantum for this turn
  uint64_t next_order_ = 0;
  uint64_t queued_ = 0;
};

}  // namespace cclo::hw::emu
