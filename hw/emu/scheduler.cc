#include "hw/emu/scheduler.h"

#include <algorithm>
#include <utility>

namespace cclo::hw::emu {

Scheduler::Scheduler(uint64_t quantum_bytes) { SetQuantum(quantum_bytes); }

void Scheduler::Configure(const Scheduling& scheduling) { scheduling_ = scheduling; }

uint64_t Scheduler::Weight(uint32_t tenant) const {
  auto it = scheduling_.weights.find(tenant);
  return it == scheduling_.weights.end() || it->second == 0 ? 1 : it->second;
}

void Scheduler::Push(uint32_t tenant, uint64_t bytes, std::function<void()> work) {
  Tenant& queue = tenants_[tenant];
  if (queue.units.empty()) round_.push_back(tenant);
  queue.units.push_back({next_order_++, bytes, std::move(work)});
  ++queued_;
}

bool Scheduler::Run(uint64_t budget) {
  uint64_t spent = 0;
  while (spent < budget && !empty()) {
    Unit unit = scheduling_.fair ? NextFair() : NextFifo();
    --queued_;
    spent += std::max<uint64_t>(unit.bytes, 1);
    unit.work();  // may Push
  }
  return !empty();
}

Scheduler::Unit Scheduler::NextFair() {
  for (;;) {
    const uint32_t tenant = round_.front();
    Tenant& queue = tenants_.at(tenant);
    if (!turn_started_) {
      queue.deficit += Weight(tenant) * quantum_bytes_;
      turn_started_ = true;
    }
    if (queue.units.front().bytes <= queue.deficit) {
      Unit unit = std::move(queue.units.front());
      queue.units.pop_front();
      queue.deficit -= unit.bytes;
      if (queue.units.empty()) {
        tenants_.erase(tenant);
        round_.pop_front();
        turn_started_ = false;
      }
      return unit;
    }
    // The next unit does not fit: the turn passes, the deficit carries over.
    round_.pop_front();
    round_.push_back(tenant);
    turn_started_ = false;
  }
}

Scheduler::Unit Scheduler::NextFifo() {
  auto oldest = round_.begin();
  for (auto it = round_.begin(); it != round_.end(); ++it) {
    if (tenants_.at(*it).units.front().order < tenants_.at(*oldest).units.front().order) {
      oldest = it;
    }
  }
  const uint32_t tenant = *oldest;
  Tenant& queue = tenants_.at(tenant);
  Unit unit = std::move(queue.units.front());
  queue.units.pop_front();
  if (queue.units.empty()) {
    if (oldest == round_.begin()) turn_started_ = false;
    round_.erase(oldest);
    tenants_.erase(tenant);
  }
  return unit;
}

}  // namespace cclo::hw::emu
