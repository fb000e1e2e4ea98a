// The team page (GET /api/v1/team; docs/teams.md): create a team; its members with their roles;
// for owners: invite by email, pending invitations with revoke, change a role, remove a member
// (with a confirmation), and each person's minutes and cost this month (GET /api/v1/team/usage);
// for everyone: leave. Every rule is the server's; the page shows its answers.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, ApiError, messageOf } from '../api';
import { formatFullTime, formatMoney, zoneLabel } from '../format';
import { TEAM_NAME_MAX } from '../limits';
import { onLinkClick } from '../router';
import type { Me, Team, TeamMember, TeamUsage } from '../types';
import { ConfirmDialog } from './Dialog';
import { Field } from './Field';
import { TableHead } from './TableHead';

type Load = { state: 'loading' } | { state: 'none' } | { state: 'team'; team: Team } | { state: 'error'; message: string };

type Confirm = { kind: 'remove'; member: TeamMember } | { kind: 'leave' } | null;

export function TeamPage(props: { me: Me; refreshMe: () => Promise<void> }) {
  const [load, setLoad] = useState<Load>({ state: 'loading' });
  const [note, setNote] = useState('');
  const [confirm, setConfirm] = useState<Confirm>(null);
  const [confirmError, setConfirmError] = useState('');
  const [busy, setBusy] = useState(false);
  const [rowError, setRowError] = useState('');
  const [refreshed, setRefreshed] = useState(0);  // bumped by "Refresh": the usage reloads too
  const [refreshing, setRefreshing] = useState(false);

  const reload = useCallback(async () => {
    try {
      const team = await api<Team>('GET', '/api/v1/team');
      setLoad({ state: 'team', team });
    } catch (e) {
      if (e instanceof ApiError && e.code === 'no_team') setLoad({ state: 'none' });
      else setLoad({ state: 'error', message: messageOf(e) });
    }
  }, []);
  useEffect(() => {
    void reload();
  }, [reload]);

  const act = async (what: () => Promise<void>, onError: (m: string) => void) => {
    setBusy(true);
    try {
      await what();
    } catch (e) {
      onError(messageOf(e));
    } finally {
      setBusy(false);
    }
  };

  const team = load.state === 'team' ? load.team : null;
  const owner = team?.my_role === 'owner';
  // The last owner may leave only as the last member, which closes the team (docs/teams.md).
  const alone = team ? team.members.length === 1 : false;
  const lastOwner = owner && team ? team.members.filter((m) => m.role === 'owner').length === 1 : false;

  return (
    <main id="main" class="page narrow">
      <div class="page-head">
        <h1>Team</h1>
        {team ? (
          <span class="muted">
            {team.name} · you are {owner ? 'an owner' : 'a member'}
          </span>
        ) : null}
        {team ? (
          <button
            type="button"
            class="secondary small head-action"
            disabled={refreshing}
            onClick={async () => {
              setRefreshing(true);
              await reload();
              setRefreshed((n) => n + 1);
              setRefreshing(false);
            }}
          >
            {refreshing ? 'Refreshing…' : 'Refresh'}
          </button>
        ) : null}
      </div>
      {note ? (
        <p class="form-ok" role="status">
          {note}
        </p>
      ) : null}
      {load.state === 'loading' ? (
        <p class="muted" aria-busy="true">
          Loading your team…
        </p>
      ) : load.state === 'error' ? (
        <p class="form-error" role="alert">
          {load.message}{' '}
          <button type="button" class="link" onClick={() => void reload()}>
            Try again
          </button>
        </p>
      ) : load.state === 'none' ? (
        <CreateTeam
          onCreated={async (t) => {
            setLoad({ state: 'team', team: t });
            setNote(`${t.name} is made, with you as its owner. Its instances are billed to the team.`);
            await props.refreshMe();
          }}
        />
      ) : team ? (
        <>
          <section class="card section" aria-labelledby="members-title">
            <h2 id="members-title">Members</h2>
            <div class="table-scroll">
              <table class="data stacked">
                <caption class="visually-hidden">Members of {team.name}</caption>
                <TableHead columns={['Email', 'Role', `Joined (${zoneLabel()})`, owner ? 'Actions' : null]} />
                <tbody>
                  {team.members.map((m) => (
                    <tr key={m.person_id} data-member={m.email}>
                      <td data-label="Email">
                        {m.email}
                        {m.person_id === props.me.id ? <span class="muted"> (you)</span> : null}
                      </td>
                      <td data-label="Role">{m.role}</td>
                      <td data-label="Joined">{formatFullTime(m.joined_at)}</td>
                      {owner ? (
                        <td data-label="Actions">
                          {m.person_id === props.me.id ? null : (
                            <span class="row-actions">
                              <button
                                type="button"
                                class="secondary small"
                                disabled={busy}
                                aria-label={`${m.role === 'owner' ? 'Make member' : 'Make owner'}: ${m.email}`}
                                onClick={() =>
                                  void act(
                                    async () => {
                                      setRowError('');
                                      await api('PUT', `/api/v1/team/members/${encodeURIComponent(m.person_id)}/role`, {
                                        role: m.role === 'owner' ? 'member' : 'owner',
                                      });
                                      await reload();
                                    },
                                    setRowError,
                                  )
                                }
                              >
                                {m.role === 'owner' ? 'Make member' : 'Make owner'}
                              </button>
                              <button
                                type="button"
                                class="danger-outline small"
                                disabled={busy}
                                aria-label={`Remove ${m.email}`}
                                onClick={() => {
                                  setConfirmError('');
                                  setConfirm({ kind: 'remove', member: m });
                                }}
                              >
                                Remove
                              </button>
                            </span>
                          )}
                        </td>
                      ) : null}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            {rowError ? (
              <p class="form-error" role="alert">
                {rowError}
              </p>
            ) : null}
            {lastOwner && !alone ? (
              <p class="muted" data-testid="last-owner-note">
                You are the team's only owner, so you cannot leave while others are members: make
                another member an owner first, or remove the others (the last member may leave,
                which closes the team).
              </p>
            ) : (
              <div class="actions start">
                <button
                  type="button"
                  class="danger-outline"
                  onClick={() => {
                    setConfirmError('');
                    setConfirm({ kind: 'leave' });
                  }}
                >
                  {alone ? 'Leave and close team' : 'Leave team'}
                </button>
              </div>
            )}
          </section>

          {owner ? (
            <Invitations team={team} reload={reload} />
          ) : (
            <section class="card section" aria-labelledby="billing-title">
              <h2 id="billing-title">Billing</h2>
              <p>
                Your instances are billed to <strong>{team.name}</strong>; its owners manage the
                payment method and see each member's totals. Your own sessions are on the{' '}
                <a href="/usage" onClick={(e) => onLinkClick(e, '/usage')}>
                  usage page
                </a>
                .
              </p>
            </section>
          )}

          {owner ? <UsageByMember refreshed={refreshed} /> : null}
        </>
      ) : null}

      {confirm && team ? (
        confirm.kind === 'remove' ? (
          <ConfirmDialog
            title={`Remove ${confirm.member.email}?`}
            body={
              <>
                <p>
                  <strong>{confirm.member.email}</strong> leaves {team.name} now and is mailed.
                </p>
                <p>
                  Their instances billed to the team are deleted and stop billing now. Instances
                  they run billed to themselves keep running.
                </p>
              </>
            }
            confirm="Remove member"
            danger
            busy={busy}
            error={confirmError}
            onConfirm={() =>
              void act(async () => {
                await api('DELETE', `/api/v1/team/members/${encodeURIComponent(confirm.member.person_id)}`);
                setConfirm(null);
                setNote(`${confirm.member.email} is no longer in ${team.name}.`);
                await reload();
              }, setConfirmError)
            }
            onCancel={() => setConfirm(null)}
          />
        ) : (
          <ConfirmDialog
            title={`Leave ${team.name}?`}
            body={
              <>
                <p>
                  Your instances billed to {team.name} are deleted and stop billing now. Later
                  launches are billed to you, with your own payment method.
                </p>
                {alone ? (
                  <p>
                    You are its last member: {team.name} closes, and its pending invitations stop
                    working. Its invoices stay the team's and are still collected.
                  </p>
                ) : null}
              </>
            }
            confirm={alone ? 'Leave and close team' : 'Leave team'}
            danger
            busy={busy}
            error={confirmError}
            onConfirm={() =>
              void act(async () => {
                await api('POST', '/api/v1/team/leave');
                setConfirm(null);
                setNote(alone ? `You left ${team.name}, and it is closed.` : `You left ${team.name}.`);
                setLoad({ state: 'none' });
                await props.refreshMe();
              }, setConfirmError)
            }
            onCancel={() => setConfirm(null)}
          />
        )
      ) : null}
    </main>
  );
}

function CreateTeam(props: { onCreated: (team: Team) => Promise<void> }) {
  const [name, setName] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const create = async (event: Event) => {
    event.preventDefault();
    setError('');
    if (!name.trim()) {
      setError('Enter a name for the team.');
      document.getElementById('team-name')?.focus();
      return;
    }
    setBusy(true);
    try {
      const team = await api<Team>('POST', '/api/v1/team', { name: name.trim() });
      await props.onCreated(team);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card section" aria-labelledby="create-team-title">
      <h2 id="create-team-title">You are not in a team</h2>
      <p class="muted">
        A team shares one payment method: everyone launches their own instances, billed to the team,
        and its owners see each person's usage. Your running instances are billed to the team you
        make from when they started. Your card stays on your own account: the team starts without
        one, and nobody in it can launch or restart until you, as its owner, add the team's card on
        the billing page (or the operator records one).
      </p>
      <form class="inline-form" onSubmit={create} noValidate>
        <Field
          id="team-name"
          label="Team name"
          hint="Letters, digits, spaces, '.', '-' and '_'."
          error={error}
          count={{ length: name.length, max: TEAM_NAME_MAX }}
        >
          {(a) => (
            <input
              {...a}
              type="text"
              autocomplete="organization"
              maxLength={TEAM_NAME_MAX}
              value={name}
              onInput={(e) => {
                setName(e.currentTarget.value);
                setError('');
              }}
            />
          )}
        </Field>
        <button type="submit" class="primary" disabled={busy}>
          Create team
        </button>
      </form>
    </section>
  );
}

function Invitations(props: { team: Team; reload: () => Promise<void> }) {
  const [email, setEmail] = useState('');
  const [error, setError] = useState('');
  const [sent, setSent] = useState('');
  const [busy, setBusy] = useState(false);
  const [revokeError, setRevokeError] = useState('');
  const invites = props.team.invites ?? [];

  const invite = async (event: Event) => {
    event.preventDefault();
    setError('');
    setSent('');
    if (!email.trim()) {
      setError('Enter the email address to invite.');
      document.getElementById('invite-email')?.focus();
      return;
    }
    setBusy(true);
    try {
      const r = await api<{ email: string; resent: boolean }>('POST', '/api/v1/team/invites', { email: email.trim() });
      setSent(
        r.resent
          ? `A new link went to ${r.email}; the one sent before no longer works.`
          : `Invitation sent to ${r.email}. The link works for 7 days.`,
      );
      setEmail('');
      await props.reload();
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  };

  const revoke = async (id: string, address: string) => {
    setRevokeError('');
    setSent('');
    try {
      await api('DELETE', `/api/v1/team/invites/${encodeURIComponent(id)}`);
      setSent(`The invitation to ${address} is revoked: its link no longer works.`);
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 'invite_gone')) setRevokeError(messageOf(e));
    }
    await props.reload();
  };

  return (
    <section class="card section" aria-labelledby="invite-title">
      <h2 id="invite-title">Invite by email</h2>
      <form class="inline-form" onSubmit={invite} noValidate>
        <Field
          id="invite-email"
          label="Email address"
          hint="They get a link; someone new signs up with this address first."
          error={error}
        >
          {(a) => (
            <input {...a} type="email" autocomplete="off" value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
          )}
        </Field>
        <button type="submit" class="primary" disabled={busy}>
          Send invite
        </button>
      </form>
      {sent ? (
        <p class="form-ok" role="status">
          {sent}
        </p>
      ) : null}
      <h3 class="subhead">Pending invitations</h3>
      {invites.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <div class="table-scroll">
          <table class="data stacked">
            <caption class="visually-hidden">Pending invitations</caption>
            <TableHead columns={['Email', 'Invited by', `Expires (${zoneLabel()})`, 'Actions']} />
            <tbody>
              {invites.map((i) => (
                <tr key={i.id} data-invite={i.email}>
                  <td data-label="Email">{i.email}</td>
                  <td data-label="Invited by">{i.invited_by}</td>
                  <td data-label="Expires">{formatFullTime(i.expires_at)}</td>
                  <td data-label="Actions">
                    <button
                      type="button"
                      class="danger-outline small"
                      aria-label={`Revoke the invitation to ${i.email}`}
                      onClick={() => void revoke(i.id, i.email)}
                    >
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {revokeError ? (
        <p class="form-error" role="alert">
          {revokeError}
        </p>
      ) : null}
    </section>
  );
}

/** Owners: this month's minutes and cost by the person who launched (GET /api/v1/team/usage). */
function UsageByMember(props: { refreshed: number }) {
  const [usage, setUsage] = useState<TeamUsage | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const load = useCallback(async () => {
    setBusy(true);
    try {
      setUsage(await api<TeamUsage>('GET', '/api/v1/team/usage'));
      setError('');
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  }, []);
  useEffect(() => {
    void load();
  }, [load, props.refreshed]);

  return (
    <section class="card section" aria-labelledby="team-usage-title" aria-busy={busy}>
      <h2 id="team-usage-title">Usage by member{usage ? ` · ${usage.month} (UTC)` : ''}</h2>
      {error ? (
        <p class="form-error" role="alert">
          {error}
        </p>
      ) : null}
      {!usage ? null : usage.people.length === 0 ? (
        <p class="muted">Nobody has launched anything billed to the team this month.</p>
      ) : (
        <div class="table-scroll">
          <table class="data stacked" data-testid="team-usage">
            <caption class="visually-hidden">Minutes and cost by member, {usage.month}</caption>
            <TableHead columns={['Person', { label: 'Minutes', num: true }, { label: 'Cost', num: true }]} />
            <tbody>
              {usage.people.map((p) => (
                <tr key={`${p.person_id}-${p.currency}`} data-person={p.label}>
                  <td data-label="Person">
                    {p.label}
                    {p.member ? null : <span class="muted"> (no longer a member)</span>}
                  </td>
                  <td data-label="Minutes" class="num" data-testid="member-minutes">
                    {p.minutes}
                  </td>
                  <td data-label="Cost" class="num">
                    {formatMoney(p)}
                  </td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row">Team total</th>
                <td data-label="Minutes" class="num">
                  {usage.people.reduce((n, p) => n + p.minutes, 0)}
                </td>
                <td data-label="Cost" class="num">
                  {usage.totals.map((t) => formatMoney(t)).join(' + ')}
                </td>
              </tr>
            </tfoot>
          </table>
        </div>
      )}
      {usage ? (
        <p class="muted small-text">
          {usage.closed ? 'The month is closed: these are its invoice lines.' : 'So far this month, as the invoice would say if the month closed now.'}{' '}
          As of {formatFullTime(usage.as_of)} ({zoneLabel()}).
        </p>
      ) : null}
    </section>
  );
}
