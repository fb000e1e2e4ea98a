// The v1 API's shapes as the dashboard reads them (docs/api.md). Only the fields it uses.

export interface Money {
  amount_minor: number;
  currency: string;
}

export interface Me {
  id: string;
  email: string;
  is_operator: boolean;
  email_proven: boolean;
  team: { id: string; name: string } | null;
  role: 'owner' | 'member' | null;
  billing: {
    account: { id: string; kind: 'solo' | 'team'; name: string };
    provider: string;
    payment_method_on_file: boolean;
    payment_hold: PaymentHold | null;
  };
}

/** An invoice whose payment failed: launches and restarts are refused until it is paid. */
export interface PaymentHold {
  invoice_id: string;
  reason: string;
  since: string;
}

export interface AmountTotal {
  currency: string;
  amount_minor: number;
  amount: string;
}

export interface PaymentMethod {
  /** "manual" (recorded by the operator) or "stripe"; a team member sees only this. */
  provider: string;
  brand: string | null;
  last4: string | null;
  exp_month: number | null;
  exp_year: number | null;
  description: string;
  created_at: string | null;
  updated_at?: string | null;
}

export interface Billing {
  account: { id: string; kind: 'solo' | 'team'; name: string; may_manage: boolean };
  provider: string;
  payment_method: PaymentMethod | null;
  how_to_add: string | null;
  payment_hold: PaymentHold | null;
  /** In a team: the caller's own card, which stays theirs. */
  own_payment_method: PaymentMethod | null;
  current_month: { month: string; totals: AmountTotal[]; as_of: string } | null;
}

export interface InvoiceLine {
  billing_session_id: string;
  instance_id: string;
  instance_name: string;
  gpu_type: string;
  person_id: string;
  minutes: number;
  price_minor_per_hour: number;
  amount_minor: number;
  currency: string;
  amount: string;
}

export interface Invoice {
  id: string;
  month: string;
  currency: string;
  total_minor: number;
  total: string;
  created_at: string;
  lines: InvoiceLine[];
}

export type InstanceStatus =
  | 'provisioning'
  | 'running'
  | 'restarting'
  | 'exited'
  | 'unknown'
  | 'deleting'
  | 'failed'
  | 'deleted';

export interface Instance {
  id: string;
  name: string;
  status: InstanceStatus;
  status_reason: string;
  hostname: string;
  gpu_type: string;
  restart_generation: number;
  ssh_key: { id: string; name: string; fingerprint: string };
  hosts: string[];
  ssh: { host: string; port: number; user: string } | null;
  ssh_command: string | null;
  billing_session: { id: string; started_at: string };
  created_at: string;
  gpu?: string;
  deleted_at?: string;
  drift?: { kind: string; reason: string; at: string; count: number };
}

export interface QueueEntry {
  id: string;
  gpu_type: string;
  name: string;
  ssh_key: { id: string; name: string };
  status: 'open' | 'launched' | 'cancelled';
  position: number | null;
  entered_at: string;
  left_at: string | null;
  instance_id: string | null;
  last_failure: string;
}

export interface GpuType {
  name: string;
  description: string;
  hosts_per_instance: number;
  price: Money;
  free_capacity: number;
  online: boolean;
  online_hosts: number;
  queued: number;
}

export interface SshKey {
  id: string;
  name: string;
  type: string;
  bits: number;
  fingerprint: string;
  created_at: string;
}

export interface UsageSession {
  billing_session_id: string;
  name: string;
  instance_id: string;
  gpu_type: string;
  started_at: string;
  ended_at: string | null;
  active: boolean;
  duration_seconds: number;
  billed_seconds: number;
  minutes: number;
  amount_minor: number;
  currency: string;
  amount?: string;
}

/** GET /api/v1/usage/queue: a queue entry with how long it waited and how it ended. */
export interface QueueHistoryEntry extends QueueEntry {
  wait_seconds: number;
  outcome: 'launched' | 'cancelled' | 'waiting';
  instance: { id: string } | null;
}

/** GET /api/v1/usage/daily */
export interface DailyUsage {
  utc_offset: string;
  utc_offset_minutes: number;
  as_of: string;
  days: { date: string; start: string; minutes: number; totals: AmountTotal[] }[];
}

export interface Page<T> {
  items: T[];
  page?: number;
  pages?: number;
  total?: number;
  next?: string;
  prev?: string;
}

export interface TeamMember {
  person_id: string;
  email: string;
  role: 'owner' | 'member';
  joined_at: string;
}

export interface TeamInvite {
  id: string;
  email: string;
  invited_by: string;
  created_at: string;
  sent_at: string;
  expires_at: string;
}

export interface Team {
  id: string;
  name: string;
  created_at: string;
  my_role: 'owner' | 'member';
  members: TeamMember[];
  /** Owners only. */
  invites?: TeamInvite[];
}

export interface TeamUsage {
  team_id: string;
  team_name: string;
  month: string;
  closed: boolean;
  as_of: string;
  people: { person_id: string; label: string; member: boolean; minutes: number; amount_minor: number; currency: string; amount: string }[];
  totals: AmountTotal[];
}

export interface InvitePreview {
  team_name: string;
  email: string;
  expires_at: string;
}

// ---- the operator's views (/api/v1/admin/…, docs/api.md "Operators") -----------------------

export interface AdminHost {
  id: string;
  name: string;
  gpu_type: string;
  gpu_required: boolean;
  drained: boolean;
  created_at: string;
  last_seen_at: string | null;
  inventory: {
    gpus?: Array<{ name?: string; memory_bytes?: number }>;
    /** What the agent gives every instance (docs/agent-protocol.md); docker_inside: docs/docker-inside.md. */
    limits?: { docker_inside?: string; shm_bytes?: number; not_enforced?: string[] };
    [key: string]: unknown;
  };
  engine_error: string;
  degraded_reason: string;
  instance_id: string | null;
  /** The name of the instance placed on it; null when free. */
  instance_name?: string | null;
  ssh_address?: string | null;
  ssh_ports?: { low: number; high: number } | null;
  pair?: { id: string; node_index: number; rail_address: string; partner: string } | null;
}

export interface AdminGpuType extends GpuType {
  hosts: number;
  pairs: number;
}

export interface AdminInstance {
  id: string;
  name: string;
  hostname: string;
  gpu_type: string;
  hosts: string[];
  desired: string;
  status: string;
  status_reason: string;
  owner: { id: string; email: string };
  team: { id: string; name: string } | null;
  created_at: string;
  deleted_at: string | null;
}

export interface AdminQueueEntry {
  id: string;
  gpu_type: string;
  name: string;
  position: number;
  entered_at: string;
  last_failure: string;
  owner: { id: string; email: string };
}

export interface AuditEvent {
  id: string;
  at: string;
  actor_id: string;
  actor_email: string;
  action: string;
  target: string;
  source_address: string;
  detail: Record<string, unknown>;
}

export interface RelaySession {
  id: string;
  email: string;
  key_fingerprint: string;
  instance_id: string;
  hostname: string;
  source_address: string;
  started_at: string;
  duration_seconds: number;
  bytes_from_client: number;
  bytes_to_client: number;
  end_reason: string;
  open: boolean;
}

export interface AdminPerson {
  id: string;
  email: string;
  is_operator: boolean;
  email_proven: boolean;
  created_at: string;
  team: { id: string; name: string; role?: string } | null;
}

export interface SignUpPolicy {
  policy: 'open' | 'domains' | 'invite';
  domains: string[];
}
