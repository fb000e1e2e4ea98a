// The scheduler benchmark (issue 5, docs/benchmarks.md): against the store directly (a SQLite
// file in a temp dir; no engine, no HTTP). 1,000 hosts over 4 GPU types (spark-2x's 250 hosts
// linked in 125 pairs), every slot busy, and N open queue entries spread evenly over the types.
//
//   BM_DrainDecision    frees one slot at a time (its instance finally deleted, its placement(s)
//                       dropped: what a finished delete leaves) and times QueueService::Drain
//                       for that type, which decides and records one launch (instance,
//                       placement, billing session, entry launched, outbox mail, audit) in one
//                       write transaction. 500 decisions, 125 per type. Arguments:
//                       entries: open queue entries at the start (1,000 or 10,000);
//                       event: 0 = Drain(type), which finds every free slot of the type (the
//                       periodic and operator-triggered drains); 1 = Drain(type, freed hosts),
//                       what an agent sync that freed its host asks (point lookups);
//                       ckpt_every: 0 = the store as configured (its background thread
//                       checkpoints the WAL, SqliteOptions::background_checkpoint); k = a second
//                       connection also checkpoints every k decisions, outside the timing (kept
//                       to compare with the runs from before the background checkpointer).
//   BM_ListDeep/N       times QueueService::List for the person whose entry is last in the
//                       spark-1x queue (position N/4): GET /api/v1/queue-entries' work.
//
// Counters: p50_us, p99_us, max_us and over_1ms per call in wall time, and the same as cpu_… in
// the calling thread's CPU time (the work without the time other processes had the core). Run with
// tests/bench/sched.sh. GPUWERK_BENCH_KEEP=1 keeps each run's store (its path is printed) for a
// look with sqlite3.
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/logging.h"
#include "core/random.h"
#include "mail/outbox.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/queue_service.h"
#include "store/sqlite_database.h"

namespace gpuwerk::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kHosts = 1000;
const std::vector<std::string> kTypes = {"spark-1x", "spark-2x", "bench-a", "bench-b"};

template <class T>
T Must(core::Result<T> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}
void Must(core::Result<void> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message);
}

/// `prefix` followed by `n` (snprintf: GCC 12 warns wrongly about `"p" + std::to_string(n)`).
std::string Numbered(const std::string& prefix, int n) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%d", n);
  return prefix + digits;
}

/// The store with 1,000 busy hosts and `entries` open queue entries.
class World {
 public:
  explicit World(int entries) {
    core::InitCrypto();
    spdlog::set_level(spdlog::level::warn);
    char tmpl[] = "/tmp/gpuwerk-sched-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    keep_ = std::getenv("GPUWERK_BENCH_KEEP") != nullptr;  // keep the store to inspect it
    db_ = Must(store::SqliteDatabase::Open({.path = (dir_ / "db.sqlite").string()}), "open");
    Must(store::Migrate(*db_), "migrate");
    hosts_ = std::make_unique<sched::HostRegistry>(*db_, clock_, rng_);
    instances_ = std::make_unique<sched::InstanceService>(*db_, clock_, rng_, options_);
    outbox_ = std::make_unique<mail::Outbox>(*db_, clock_, rng_);
    queue_ = std::make_unique<sched::QueueService>(*db_, clock_, rng_, options_, *outbox_);
    for (const char* t : {"bench-a", "bench-b"}) {
      Must(hosts_->SetGpuType("op", t, {.hosts_per_instance = 1, .price_minor_per_hour = 50}, "b"),
           "type");
    }
    // 250 hosts per type, heard from now.
    for (int i = 0; i < kHosts; ++i) {
      const std::string& type = kTypes[static_cast<size_t>(i % 4)];
      char name[32];
      std::snprintf(name, sizeof name, "h%04d", i);
      Must(hosts_->Add("op", name, type, true, "b"), "host");
      host_names_[type].push_back(name);
    }
    Must(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(tx.Exec("UPDATE hosts SET last_seen_at = ?", {clock_.NowUnix()}));
      return {};
    }),
         "seen");
    const auto& pair_hosts = host_names_["spark-2x"];
    for (size_t i = 0; i + 1 < pair_hosts.size(); i += 2) {
      Must(hosts_->LinkPair(
               "op",
               {pair_hosts[i], "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256)},
               {pair_hosts[i + 1],
                "10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256)},
               "b"),
           "pair");
    }
    // Every slot busy: one person holds an instance on each.
    AddPeople(1, "holder");
    int n = 0;
    for (const auto& type : kTypes) {
      for (;;) {
        auto in = instances_->Create("holder0", Numbered("h", n++), "key_holder0", type, "b");
        if (!in && in.error().api_code == "no_capacity") break;
        if (!in) throw std::runtime_error("create: " + in.error().message);
        busy_[type].push_back(in->id);
      }
    }
    // `entries` open entries, round-robin over the types, in seq order.
    AddPeople(entries, "p");
    Must(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      std::map<std::string, int64_t> seq;
      for (int i = 0; i < entries; ++i) {
        const std::string& type = kTypes[static_cast<size_t>(i % 4)];
        const std::string p = Numbered("p", i);
        GPUWERK_TRY(
            tx.Exec("INSERT INTO queue_entries (id, person_id, gpu_type, seq, name, ssh_key_id, "
                    "status, entered_at) VALUES (?, ?, ?, ?, 'job', ?, 'open', ?)",
                    {"qen_" + p, p, type, ++seq[type], "key_" + p, clock_.NowUnix()}));
        if (type == "spark-1x") deep_person_ = p;
      }
      return {};
    }),
         "entries");
  }
  ~World() {
    if (side_ != nullptr) sqlite3_close(side_);
    queue_.reset();
    db_.reset();
    std::error_code ec;
    if (keep_) {
      std::fprintf(stderr, "kept %s\n", dir_.c_str());
    } else {
      std::filesystem::remove_all(dir_, ec);
    }
  }

  /// Frees the next busy slot of `type` as a finished delete would: the instance finally
  /// deleted, its placement(s) dropped. Returns the freed host ids.
  std::vector<std::string> FreeOne(const std::string& type) {
    auto& ids = busy_[type];
    if (ids.empty()) throw std::runtime_error("no busy slot left of " + type);
    const std::string id = ids.back();
    ids.pop_back();
    std::vector<std::string> hosts;
    Must(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto rows, tx.Query("SELECT host_id FROM placements WHERE instance_id = ?", {id}));
      for (const auto& r : rows) hosts.push_back(r.Text(0));
      GPUWERK_TRY(
          tx.Exec("UPDATE instances SET desired = 'deleted', status = 'deleted', deleted_at = ? "
                  "WHERE id = ?",
                  {clock_.NowUnix(), id}));
      GPUWERK_TRY(tx.Exec("DELETE FROM placements WHERE instance_id = ?", {id}));
      return {};
    }),
         "free");
    return hosts;
  }

  /// Checkpoints the store's WAL from a connection of its own (a background checkpointer).
  void Checkpoint() {
    if (side_ == nullptr && sqlite3_open_v2((dir_ / "db.sqlite").c_str(), &side_,
                                            SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      throw std::runtime_error("open for checkpoint");
    }
    // A connection learns that the file is in WAL mode when it first reads it.
    sqlite3_exec(side_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    sqlite3_wal_checkpoint_v2(side_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }

  sched::QueueService& queue() { return *queue_; }
  const std::string& deep_person() const { return deep_person_; }

 private:
  void AddPeople(int count, const std::string& prefix) {
    Must(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      for (int i = 0; i < count; ++i) {
        const std::string p = Numbered(prefix, i);
        GPUWERK_TRY(
            tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?, ?, ?, 0)",
                    {p, p + "@example.test", p + "@example.test"}));
        GPUWERK_TRY(
            tx.Exec("INSERT INTO ssh_keys (id, person_id, name, key_type, bits, public_key, "
                    "fingerprint, created_at) VALUES (?, ?, 'laptop', 'ssh-ed25519', 256, ?, "
                    "?, 0)",
                    {"key_" + p, p, "ssh-ed25519 AAAA" + p + " laptop", "SHA256:" + p}));
      }
      return {};
    }),
         "people");
  }

  std::filesystem::path dir_;
  bool keep_ = false;
  sqlite3* side_ = nullptr;
  core::FakeClock clock_;
  core::SodiumRng rng_;
  sched::SchedOptions options_;
  std::unique_ptr<store::SqliteDatabase> db_;
  std::unique_ptr<sched::HostRegistry> hosts_;
  std::unique_ptr<sched::InstanceService> instances_;
  std::unique_ptr<mail::Outbox> outbox_;
  std::unique_ptr<sched::QueueService> queue_;
  std::map<std::string, std::vector<std::string>> host_names_;
  std::map<std::string, std::vector<std::string>> busy_;
  std::string deep_person_;
};

/// This thread's CPU time in seconds: the work itself, without the time the scheduler gave
/// other processes (the build machine is shared).
double ThreadCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// Adds p50/p99/max of `samples` (seconds) as microsecond counters named `prefix`…, and how
/// many were over 1 ms.
void Report(benchmark::State& state, std::vector<double> samples, const std::string& prefix) {
  if (samples.empty()) return;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[std::min(samples.size() - 1, static_cast<size_t>(q * samples.size()))] * 1e6;
  };
  state.counters[prefix + "p50_us"] = at(0.50);
  state.counters[prefix + "p99_us"] = at(0.99);
  state.counters[prefix + "max_us"] = samples.back() * 1e6;
  state.counters[prefix + "over_1ms"] = static_cast<double>(
      std::count_if(samples.begin(), samples.end(), [](double s) { return s > 1e-3; }));
}

void BM_DrainDecision(benchmark::State& state) {
  World world(static_cast<int>(state.range(0)));
  std::vector<double> samples, cpu;
  size_t k = 0;
  for (auto _ : state) {
    const std::string& type = kTypes[k++ % kTypes.size()];
    const std::vector<std::string> freed = world.FreeOne(type);
    if (state.range(2) > 0 && k % static_cast<size_t>(state.range(2)) == 0) world.Checkpoint();
    const std::vector<std::string> hint = state.range(1) == 1 ? freed : std::vector<std::string>();
    const auto start = Clock::now();
    const double cpu_start = ThreadCpuSeconds();
    auto drained = world.queue().Drain(type, hint);
    cpu.push_back(ThreadCpuSeconds() - cpu_start);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!drained || drained->launched.size() != 1) {
      state.SkipWithError(drained ? "a drain did not launch exactly one entry"
                                  : drained.error().message.c_str());
      break;
    }
    state.SetIterationTime(seconds);
    samples.push_back(seconds);
  }
  Report(state, std::move(samples), "");
  Report(state, std::move(cpu), "cpu_");
}

void BM_ListDeep(benchmark::State& state) {
  World world(static_cast<int>(state.range(0)));
  std::vector<double> samples, cpu;
  for (auto _ : state) {
    const auto start = Clock::now();
    const double cpu_start = ThreadCpuSeconds();
    auto list = world.queue().List(world.deep_person(), 1);
    cpu.push_back(ThreadCpuSeconds() - cpu_start);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!list || list->items.size() != 1 || list->items.at(0).position != state.range(0) / 4) {
      state.SkipWithError("List did not show the deep entry at its position");
      break;
    }
    state.SetIterationTime(seconds);
    samples.push_back(seconds);
  }
  state.counters["position"] = static_cast<double>(state.range(0) / 4);
  Report(state, std::move(samples), "");
  Report(state, std::move(cpu), "cpu_");
}

BENCHMARK(BM_DrainDecision)
    ->ArgNames({"entries", "event", "ckpt_every"})
    ->Args({1000, 0, 0})
    ->Args({10000, 0, 0})
    ->Args({1000, 1, 0})
    ->Args({10000, 1, 0})
    ->Args({10000, 1, 10})
    ->Iterations(500)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ListDeep)
    ->Arg(1000)
    ->Arg(10000)
    ->Iterations(2000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuwerk::bench

BENCHMARK_MAIN();
