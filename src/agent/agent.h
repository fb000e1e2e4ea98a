#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/agent_client.h"
#include "agent/authorized_keys.h"
#include "agent/cluster_files.h"
#include "agent/container_engine.h"
#include "agent/drift.h"
#include "agent/instance_limits.h"
#include "agent/instance_runtime.h"
#include "agent/inventory.h"
#include "agent/network_isolation.h"
#include "agent/probe_process.h"
#include "agent/reconciler.h"
#include "agent/start_backoff.h"
#include "core/error.h"

namespace gpuwerk::agent {

/// Configuration of Agent.
struct AgentOptions {
  /// The host address sshd's port is published on (never a wildcard: ContainerSpec).
  std::string ssh_bind_address = "127.0.0.1";
  /// Where the agent keeps `agent-state.json` (restart generations applied by restart, so an
  /// agent restart restarts nothing). Empty: in memory only.
  std::filesystem::path state_dir;
  /// Where the agent keeps each container's authorized_keys, which the container mounts
  /// read-only at /etc/ssh/gpuwerk (AgentKeysPathsFor, AgentKeysBinds: `keys_dir/containers/
  /// <container name>/authorized_keys` and the sshd drop-in `keys_dir/sshd-keys.conf`). Must be
  /// a path the container engine can bind from (the same host). Empty: `state_dir/keys`, or with
  /// no state_dir a temporary directory of the agent's own (removed with the Agent).
  std::filesystem::path keys_dir;
  /// The pause between rounds until the server says otherwise (`sync_interval_seconds`).
  std::chrono::milliseconds sync_interval = std::chrono::seconds(2);
  /// The time limit of each engine call (list, inspect, create, …).
  std::chrono::milliseconds engine_timeout = std::chrono::seconds(10);
  /// Seconds the engine waits after SIGTERM before SIGKILL on a restart.
  int restart_stop_timeout_seconds = 5;
  /// How long the SSH readiness probe waits for the "SSH-2.0-" banner, and (rounded up to whole
  /// seconds) for the login proof (ProbeLogin, in its confined child: `login_probe`).
  std::chrono::milliseconds ssh_probe_timeout = std::chrono::seconds(1);
  /// How the login proof runs: a libssh client talking to the container's sshd, which the tenant
  /// controls, so never in the agent's process (which holds the engine socket): a child process
  /// without the agent's descriptors, environment or privileges (ProbeLoginConfined; issue 12
  /// finding 9). The agent command sets `command` to {"/proc/self/exe", "login-probe"}; empty
  /// (the default): no login can be proven (the instance stays provisioning; logged).
  ConfinedProbeOptions login_probe;
  /// The pause between rounds while a running container's login is not proven yet (a start or
  /// restart in progress), so that `running` is reported soon after sshd accepts.
  std::chrono::milliseconds ready_poll_interval = std::chrono::milliseconds(250);
  /// How often the agent checks that a running container's sshd still accepts the relay key
  /// (CheckRelayKey; also right after each proven login).
  std::chrono::milliseconds relay_check_interval = std::chrono::seconds(30);
  /// How long one long poll of the server's watch lasts (seconds, 1–55).
  std::chrono::seconds watch_wait = std::chrono::seconds(25);
  /// Labels added to every container the agent creates and to its list filter (tests use one
  /// per run, so that agents on one engine never touch each other's containers).
  std::map<std::string, std::string> extra_labels;
  std::string agent_version = "0.1.0";
  /// The relay CAs' keys ("ssh-ed25519 BASE64": ParseRelayCaLine of `gpuwerk agent --relay-ca`;
  /// docs/ssh.md "Upstream: the relay credential"). Every container's authorized_keys gets, after
  /// the desired lines and `relay_authorized_keys`, for each CA the line that trusts it for that
  /// container's instance alone (RelayCaKeyLine, with `relay_ca_from`) and its probe line
  /// (RelayCaProbeLine). An instance id that makes no principal gets neither (logged).
  std::vector<std::string> relay_certificate_authorities;
  /// sshd `from=` patterns for the CA lines (ValidateFromPatterns); "": none.
  std::string relay_ca_from;
  /// A probe certificate of one of those CAs (ParseRelayProbeCertificate of `--relay-ca-probe`):
  /// what the relay check offers sshd (a public-key query; it cannot log in). Empty: the check
  /// reads the agent's own copy of the file only (it cannot ask sshd about a CA line without a
  /// certificate).
  std::string relay_probe_certificate;
  /// Plain authorized_keys lines added to every container's after the desired ones, e.g.
  /// `from="10.0.0.2" ssh-ed25519 AAAA… gpuwerk-relay` (RestrictRelayKeyLine): for relays older
  /// than the relay CA, which log in with their key alone (`gpuwerk agent --relay-key`). Such a
  /// key opens every container that holds it (issue 12 finding 1): kept for a rolling upgrade
  /// only. Without CAs the agent checks that sshd still accepts the first one (its key, without
  /// options) and writes the file again when not; when that line has options and sshd refuses
  /// the agent's own address, it reads its own copy of the file instead (AgentKeysHold).
  std::vector<std::string> relay_authorized_keys;
  /// What every container is given: memory, CPU and pids limits and the capabilities it keeps
  /// (ResolveInstanceLimits; docs/isolation.md). A desired entry's own `memory_bytes` (the
  /// server's `instance_memory_bytes`) applies when it is lower. Reported in the inventory's
  /// `limits`. Default-constructed: no limits and kInstanceCapabilities.
  InstanceLimits instance_limits{
      .capabilities = {kInstanceCapabilities.begin(), kInstanceCapabilities.end()}};
  /// What every container gets besides its limits: the Docker inside mode, /dev/shm's size and
  /// memlock unlimited (ApplyInstanceRuntime; docs/docker-inside.md). Reported in the inventory's
  /// `limits` (`docker_inside`, `shm_bytes`). Default: off, kDefaultShmBytes, no memlock asked
  /// (the commands resolve it: ResolveInstanceRuntime).
  InstanceRuntime instance_runtime;
  /// Whether each instance's containers get a network of their own (InstanceNetworkName,
  /// labelled kNetworkInstanceLabel and kHostLabel plus `extra_labels`) instead of the engine's
  /// default bridge; the agent removes it once no container of the instance is left on the
  /// engine. The filter rules between those networks are the host's (InstallNetworkIsolation,
  /// done by the command that starts the agent). Default false: the engine's default bridge.
  bool instance_networks = false;
  /// Checks and sets right the host's filter rules (KeepNetworkIsolation with the host's
  /// settings; set by the command that installed them): called at the start of every round (at
  /// most every `network_check_interval`) and again right after a round's steps created, started
  /// or restarted a container, before the round probes and reports it, because the engine adds
  /// its own rules when a container joins a network (podman's CNI plugins insert their jumps at
  /// the top of FORWARD, where their ACCEPT would decide before the agent's rules). What it set
  /// right is logged as a warning; an error is logged and said in the inventory's
  /// `limits.not_enforced` until a check succeeds. Empty: no check.
  std::function<core::Result<std::vector<IsolationRepair>>()> keep_network_isolation;
  /// How the rail reaches the containers of a 2-host instance's nodes (the engine network they
  /// join with their rail address, the interface name inside, RDMA devices; cluster_files.h,
  /// docs/clusters.md). Used only for desired containers that carry a `cluster`.
  RailOptions rail;
  /// The least time between two checks of `keep_network_isolation` at round starts.
  std::chrono::milliseconds network_check_interval = std::chrono::seconds(1);
};

/// Logs what InstallNetworkIsolation or KeepNetworkIsolation set right, one line each, as
/// `<component>: instance network filter (IPv4|IPv6): <sentence>`: a warning, except a jump
/// inserted at `install` (the first install of a host), which is information.
void LogIsolationRepairs(std::string_view component, const std::vector<IsolationRepair>& repairs,
                         bool install);

/// A create that failed for good, for the sync request's `failures`.
using CreateFailure = protocol::CreateFailure;

/// The host agent's loop (docs/agent-protocol.md): each round it lists the containers it owns
/// (label kInstanceLabel plus `extra_labels`), inspects them, applies Reconcile's steps against
/// the desired list of the last sync response, probes sshd of the running ones, and sends the
/// sync request with inventory, engine health, containers and failures; the response's desired
/// list drives the next round.
///
/// Engine trouble (socket gone, timeout: case C11) never stops the agent: the round reports
/// engine {ok:false, error} and the last known containers with state "unknown", takes no step,
/// and the next round tries again. A create that fails leaves no container behind (it is
/// removed); it is reported in `failures` at once when it cannot work (image_not_found, a bad
/// spec, a GPU runtime error: C13), and after 3 tries in a row when the engine failed in passing
/// (a 5xx, a timeout). Restart
/// generations applied at create live in the container's kGenerationLabel; those applied by
/// restart in memory and in `state_dir/agent-state.json`, beside the digest of the
/// authorized_keys each container was last given: when the desired key lines change (a relay key
/// added, a person's access removed, C09), the agent rewrites the file without restarting the
/// container: its own copy on the host, which the container mounts read-only (WriteAgentKeys;
/// for a container made before that mount, the engine's archive upload). The agent never runs
/// anything in a container (issue 12 finding 9).
///
/// Thread-safety: RunOnce and Run must be called from one thread; Stop may be called from any
/// thread at any time. `engine` and `client` must outlive the Agent.
class Agent {
 public:
  Agent(AgentOptions options, ContainerEngine& engine, SyncClient& client, Inventory inventory);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// Loads the state file (a missing file is empty; an unreadable one is logged and ignored).
  void LoadState();

  /// One round: observe, act when a desired list is known, observe again after acting, sync.
  /// Returns whether another round should follow at once (the new desired list needs steps).
  /// Errors: the sync's (see AgentClient); the engine's are reported, not returned.
  core::Result<bool> RunOnce();

  /// Rounds until Stop(): after each, waits the server's `sync_interval_seconds` (default
  /// AgentOptions::sync_interval), `ready_poll_interval` while a running container's login is
  /// not proven yet, or not at all when RunOnce asked for it. Meanwhile a second thread long-polls
  /// the server (SyncClient::Watch) and ends the wait as soon as the host's desired state changes,
  /// so that launches, restarts and deletes start at once. Sync errors are logged and retried at
  /// the next round.
  void Run();

  /// Makes Run return after the current step; wakes its wait. Thread-safe, idempotent.
  void Stop();

  /// The last request body sent, as JSON (for tests and logs).
  const nlohmann::json& last_request() const { return last_request_; }

  /// Whether `host:port` answers with an SSH banner ("SSH-2.0-") within `timeout`.
  static bool SshBannerSeen(const std::string& host, uint16_t port,
                            std::chrono::milliseconds timeout);

 private:
  /// Whether a running container is ready: its sshd accepts the first authorized key of its
  /// desired entry for root (ProbeLogin, case C05), proven once per container start and then
  /// checked by banner; without a desired entry or a key line libssh can read, by banner only.
  /// Sets the container's `login_error` when sshd refuses the key.
  bool ContainerReady(const ContainerInfo& c);
  /// Whether the container's sshd still accepts the relay's credential for root: with relay CAs,
  /// the probe certificate (`relay_probe_certificate`, which the CA's probe line admits beside
  /// the instance's own CA line), else the first plain relay key. When sshd refuses it, forgets
  /// that the file is current so that this round writes it again, and records the fault
  /// (ContainerRecord::relay_error, case C07), which the container's error reports until a later
  /// check finds the credential accepted (or, where sshd cannot be asked: a plain line with
  /// options, CA lines without a probe certificate, present in the agent's own file). A check
  /// that gets no answer, or cannot read the file, changes nothing. Checked at most every
  /// `relay_check_interval`.
  void CheckRelayKey(const ContainerInfo& c, bool force);
  /// The relay's lines of a container of instance `instance_id`: the plain relay lines, then per
  /// CA its instance line and its probe line (AgentOptions).
  std::vector<std::string> RelayLines(const std::string& instance_id) const;
  /// Reads the container's sshd ed25519 host key through the engine (ReadSshHostKey: an archive
  /// download, nothing runs in the container) into its record, once, when it is the key its sshd
  /// presented to the login probe (an engine that reads another filesystem, as some CI roots'
  /// podman does for archives, must not pin a wrong key); a failed read or a key that differs is
  /// tried again while the container is proven, at most kHostKeyTries times in all, then logged.
  void ReadHostKey(const ContainerInfo& c);
  static constexpr int kHostKeyTries = 3;
  /// Asks container `c`'s sshd whether it accepts `key_line` for root: ProbeLoginConfined with
  /// `login_probe` (never in this process). Logs a new error of the child once.
  LoginProbeAnswer Probe(const ContainerInfo& c, const std::string& key_line);
  std::string last_probe_error_;
  /// Whether the container's authorized_keys was last written with its desired entry's current
  /// key lines (KeyLines); false without a desired entry or a record of a write.
  bool KeysCurrent(const ContainerInfo& c) const;
  void Observe();
  void WatchLoop();
  bool Apply(const std::vector<Action>& actions);
  void Create(const DesiredContainer& d);
  /// Removes this host's instance networks whose instance has no container on the engine and
  /// is not desired here (instance_networks).
  void SweepNetworks();
  /// Runs `keep_network_isolation` (when set): always when `now`, else when the last check is
  /// `network_check_interval` old. Logs what it set right, and an error once per new message.
  void CheckNetworkIsolation(bool now);
  std::optional<std::chrono::steady_clock::time_point> last_network_check_;
  /// The last check's error ("" when it succeeded), for the inventory and the log.
  std::string network_check_error_;
  /// When SweepNetworks runs next: after a removal, else a minute after the last sweep (the
  /// first a minute after the start).
  bool sweep_networks_now_ = false;
  std::chrono::steady_clock::time_point next_network_sweep_ =
      std::chrono::steady_clock::now() + std::chrono::minutes(1);
  /// Rewrites authorized_keys of the running or created containers whose desired key lines
  /// changed since they were last written (a relay key added, a person's access removed: C09).
  /// Returns whether it wrote any.
  bool SyncAuthorizedKeys();
  /// Before the start of a stopped container (action `a`) whose authorized_keys is not known to
  /// be current (KeysCurrent): writes it (WriteKeys) and records it. Returns
  /// whether the start may go ahead (false: the write failed, logged; the next round retries).
  bool KeysBeforeStart(const Action& a);
  /// Whether the container named `spec.name` that the engine says already exists (create answered
  /// "container_exists") carries `spec`'s instance, node and host labels: the work of an earlier
  /// create whose answer the agent gave up on (timeout) but the engine carried out after the
  /// round's listing. False when the inspect fails or any label differs (someone else's name).
  bool MadeByAnEarlierTry(const ContainerSpec& spec);
  /// The host paths of container `container_name`'s keys (under keys_dir; made on first use when
  /// the agent has none). Errors: AgentKeysPathsFor's, "authorized_keys_write_failed".
  core::Result<AgentKeysPaths> KeysPaths(std::string_view container_name);
  /// Writes container `c`'s keys as `lines`: the agent's read-only copy on the host
  /// (WriteAgentKeys) when `c` has the keys mount (kKeysLabel), else by the engine's archive
  /// upload (WriteAuthorizedKeysByArchive). Never runs anything in the container.
  core::Result<void> WriteKeys(const ContainerInfo& c, const std::vector<std::string>& lines);
  std::filesystem::path keys_root_;
  std::filesystem::path temporary_keys_root_;  ///< made by KeysPaths; removed by ~Agent
  /// The key lines a container of `d` gets: the desired ones, then the relay's.
  std::vector<std::string> KeyLines(const DesiredContainer& d) const;
  void RecordGeneration(const std::string& id, int64_t generation);
  /// The generations applied by restart, as Reconcile takes them.
  AppliedGenerations Applied() const;
  /// Whether container `id` is running and ready (ssh_ready) this round.
  bool Ready(const std::string& id) const;
  void SaveState();
  protocol::AgentSyncRequest BuildRequest() const;
  std::map<std::string, std::string> LabelFilter() const;
  /// Whether a listed container is this agent's: it carries this host's kHostLabel, or no host
  /// label and a name a desired entry of this host gives (made by an agent before host labels).
  bool Owns(const ContainerInfo& c) const;

  AgentOptions options_;
  ContainerEngine& engine_;
  SyncClient& client_;
  Inventory inventory_;

  /// What the agent keeps about one container it owns, by container id. A record lives while
  /// the container is observed (LoadState may bring records of containers not observed yet);
  /// `applied_generation` and `keys_digest` are also in `state_dir/agent-state.json`.
  struct ContainerRecord {
    /// The restart generation applied by a restart or start (those applied at create are in the
    /// container's kGenerationLabel); nullopt: none.
    std::optional<int64_t> applied_generation;
    /// SHA-256 of the key lines its authorized_keys was last written with; nullopt: unknown
    /// (adopted, or the relay key went missing), so the file is written again.
    std::optional<std::string> keys_digest;
    /// The pause before starting again a container that keeps exiting.
    StartBackoff start_backoff;
    /// While it runs: the started_at of the start whose login was proven (ContainerReady).
    std::optional<std::string> proven_start;
    /// While proven: when its relay key was last checked (CheckRelayKey).
    std::optional<std::chrono::steady_clock::time_point> relay_checked_at;
    /// This round: whether it is ready (running and proven), and why not when sshd said no.
    bool ssh_ready = false;
    std::string login_error;
    /// The relay credential's fault (case C07): sshd refused the relay key and the file is being
    /// written again, or writing it failed. Unlike `login_error` it is kept from round to round
    /// (a round that finds the file due for a rewrite does not check, and must not make the
    /// fault vanish): only CheckRelayKey finding the relay key accepted clears it, or the
    /// container's removal. Reported in the container's `error` after `login_error`.
    std::string relay_error;
    /// Its sshd's ed25519 host key ("ssh-ed25519 BASE64"), read once its login is proven
    /// (ReadSshHostKey, through the engine's archive download) and reported in every sync
    /// (docs/agent-protocol.md "Host key"); "" until read. A container keeps its keys for its
    /// life (the image makes them at its first start), so one read per container is enough.
    std::string host_key;
    int host_key_tries = 0;  ///< failed reads; the agent gives up after kHostKeyTries
    /// The host key its sshd presented to the login probe that proved this start ("TYPE BASE64");
    /// the key read from the container must be this one to be reported.
    std::string presented_host_key;
  };

  /// Drift (docs/agent-protocol.md "Drift"): what the last observation saw, the containers the
  /// agent started, restarted or removed since, those it started or restarted in the last
  /// kOwnStartGrace (a restart the engine carries out a little later is still its own), and the
  /// drift found but not yet sent (kept until a sync succeeds, at most kMaxPendingDrift).
  KnownContainers known_;
  std::set<std::string> touched_;
  std::map<std::string, std::chrono::steady_clock::time_point> started_;  // id → when
  std::vector<DriftReport> drift_;

  bool engine_ok_ = false;
  std::string engine_error_;
  std::vector<ContainerInfo> observed_;             // last known, inspected
  std::map<std::string, ContainerRecord> records_;  // by container id
  std::vector<CreateFailure> failures_;             // since the last successful sync
  std::map<std::string, int> create_attempts_;  // "instance/node" → transient failures in a row
  bool have_desired_ = false;
  std::string host_id_;  // from the sync answer; "" until the first one
  std::vector<DesiredContainer> desired_;
  nlohmann::json last_request_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;            // guarded by mu_
  bool woken_ = false;           // guarded by mu_: the watch saw a change
  std::string desired_version_;  // guarded by mu_: of the last sync answer, "" before one
};

}  // namespace gpuwerk::agent
