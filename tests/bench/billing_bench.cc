// The month-close benchmark (issue 13, docs/benchmarks.md "Month close"): billing::Invoices::
// CloseMonth against the store directly (a SQLite file in a temp dir; no HTTP). 1,000 billing
// accounts (solo people) and N billing sessions in November 2026 spread evenly over them (N =
// 1,000 and 10,000): one in ten crosses into December, one in ten has an unbilled gap, one in
// fifty is still running. Each iteration closes November for every account (reads every session
// and its gaps, writes 1,000 invoices and N lines, audits), then deletes the invoices outside the
// timing so the next iteration does the same work.
//
// Counters: us_per_session (wall time of one close / N) and lines (lines written per close).
// Run with tests/bench/billing.sh, which prints the growth 1,000 -> 10,000.
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "billing/billing_session_table.h"
#include "billing/invoices.h"
#include "core/clock.h"
#include "core/logging.h"
#include "core/random.h"
#include "core/time_format.h"
#include "store/sqlite_database.h"

namespace gpuwerk::bench {
namespace {

constexpr int kAccounts = 1000;

void Must(core::Result<void> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message);
}

/// `prefix` followed by `n`.
std::string Numbered(const char* prefix, int n) {
  char text[32];
  std::snprintf(text, sizeof text, "%s%05d", prefix, n);
  return text;
}

class World {
 public:
  explicit World(int sessions) : clock_(core::ParseRfc3339("2026-12-01T02:00:00Z").value()) {
    core::InitCrypto();
    spdlog::set_level(spdlog::level::warn);
    char tmpl[] = "/tmp/gpuwerk-billing-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    auto db = store::SqliteDatabase::Open({.path = (dir_ / "db.sqlite").string()});
    if (!db) throw std::runtime_error("open: " + db.error().message);
    db_ = std::move(*db);
    Must(store::Migrate(*db_), "migrate");
    const int64_t month = core::ParseRfc3339("2026-11-01T00:00:00Z").value();
    const int64_t december = core::ParseRfc3339("2026-12-01T00:00:00Z").value();
    Must(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      for (int p = 0; p < kAccounts; ++p) {
        const std::string id = Numbered("per_", p);
        GPUWERK_TRY(
            tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?, ?, ?, 0)",
                    {id, id + "@example.test", id + "@example.test"}));
      }
      for (int i = 0; i < sessions; ++i) {
        const std::string person = Numbered("per_", i % kAccounts);
        const std::string id = Numbered("bil_", i);
        // Spread over the month; 1 to 600 minutes long.
        const int64_t start = month + (static_cast<int64_t>(i) * 2591) % (29 * 86400);
        std::optional<int64_t> end = start + 60 + (i * 37) % 36000;
        if (i % 10 == 3) end = december + 3600;  // into December
        if (i % 50 == 7) end.reset();            // still running
        GPUWERK_TRY(billing::BillingSessionTable::Insert(
            tx, {.id = id,
                 .instance_id = Numbered("ins_", i),
                 .person_id = person,
                 .billing_account_id = "solo_" + person,
                 .instance_name = Numbered("job-", i),
                 .gpu_type = "spark-1x",
                 .price_minor_per_hour = 65,
                 .currency = "usd",
                 .started_at = start,
                 .evidence_at = end.value_or(clock_.NowUnix())}));
        if (end) GPUWERK_TRY(billing::BillingSessionTable::End(tx, id, *end));
        if (i % 10 == 5) {
          GPUWERK_TRY(billing::BillingSessionTable::AddGap(tx, id, {start + 30, start + 50}));
        }
      }
      return {};
    }),
         "seed");
    invoices_ = std::make_unique<billing::Invoices>(*db_, clock_, rng_, 30);
  }
  ~World() {
    invoices_.reset();
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  billing::Invoices& invoices() { return *invoices_; }
  void Reopen() {
    Must(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(tx.Exec("DELETE FROM invoice_lines"));
      GPUWERK_TRY(tx.Exec("DELETE FROM invoices"));
      GPUWERK_TRY(tx.Exec("DELETE FROM invoice_months_closed"));
      return {};
    }),
         "reopen");
  }

 private:
  std::filesystem::path dir_;
  core::FakeClock clock_;
  core::SodiumRng rng_;
  std::unique_ptr<store::Database> db_;
  std::unique_ptr<billing::Invoices> invoices_;
};

void BM_CloseMonth(benchmark::State& state) {
  const int sessions = static_cast<int>(state.range(0));
  World world(sessions);
  int64_t lines = 0;
  double seconds = 0;
  int64_t closes = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto closed = world.invoices().CloseMonth("2026-11", "", "bench");
    const auto t1 = std::chrono::steady_clock::now();
    if (!closed) throw std::runtime_error("close: " + closed.error().message);
    if (closed->invoices_created != kAccounts) throw std::runtime_error("not every account");
    lines = closed->lines_created;
    seconds += std::chrono::duration<double>(t1 - t0).count();
    ++closes;
    state.PauseTiming();
    world.Reopen();
    state.ResumeTiming();
  }
  state.counters["lines"] = static_cast<double>(lines);
  state.counters["us_per_session"] = seconds / static_cast<double>(closes) / sessions * 1e6;
  state.counters["ms_per_close"] = seconds / static_cast<double>(closes) * 1e3;
}

BENCHMARK(BM_CloseMonth)
    ->ArgName("sessions")
    ->Arg(1000)
    ->Arg(10000)
    ->Iterations(10)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace gpuwerk::bench

BENCHMARK_MAIN();
