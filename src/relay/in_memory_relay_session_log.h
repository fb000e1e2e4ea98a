#pragma once

#include <mutex>
#include <vector>

#include "relay/relay_session_log.h"

namespace gpuwerk::relay {

/// A RelaySessionLog that keeps every record in memory (tests, and `gpuwerk up` until the server
/// endpoint exists). Thread-safe; the accessors return copies.
class InMemoryRelaySessionLog final : public RelaySessionLog {
 public:
  void OnStart(const RelaySessionRecord& record) override {
    std::lock_guard lock(mu_);
    started_.push_back(record);
  }
  void OnEnd(const RelaySessionRecord& record) override {
    std::lock_guard lock(mu_);
    ended_.push_back(record);
  }
  void OnRefused(const RelayRefusalRecord& record) override {
    std::lock_guard lock(mu_);
    refused_.push_back(record);
  }
  std::vector<RelaySessionRecord> Started() const {
    std::lock_guard lock(mu_);
    return started_;
  }
  std::vector<RelaySessionRecord> Ended() const {
    std::lock_guard lock(mu_);
    return ended_;
  }
  std::vector<RelayRefusalRecord> Refused() const {
    std::lock_guard lock(mu_);
    return refused_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<RelaySessionRecord> started_;
  std::vector<RelaySessionRecord> ended_;
  std::vector<RelayRefusalRecord> refused_;
};

}  // namespace gpuwerk::relay
