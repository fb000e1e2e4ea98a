// The billing page (GET /api/v1/billing, /api/v1/billing/invoices): who pays, the payment method
// on file (or how to add one: Stripe Checkout, or the operator under manual billing), removing it,
// the current month's running total and past invoices with their lines. A team member sees who
// manages billing and no card facts. Stripe Checkout comes back to /billing?card_setup=done or
// ?card_setup=cancelled (src/billing/stripe_provider.cc), which this page reports.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, messageOf } from '../api';
import { formatFullTime, formatMoney, zoneLabel } from '../format';
import type { Billing, Invoice, Me, Page, PaymentMethod } from '../types';
import { CommandWords } from './CommandWords';
import { ConfirmDialog } from './Dialog';
import { TableHead } from './TableHead';

type Returned = 'done' | 'cancelled' | null;

/** Where the card on file before leaving for Checkout is kept, so that coming back the page waits
 * for a different card (a replacement) rather than taking the old one for the new. */
const CARD_BEFORE_KEY = 'gpuwerk.cardBeforeCheckout';

/** What tells one card on file from another. */
function cardKey(m: PaymentMethod | null): string {
  return m ? `${m.provider}|${m.brand}|${m.last4}|${m.exp_month}/${m.exp_year}|${m.updated_at ?? ''}` : '';
}

/** The card on file when the person left for Checkout ('' when none), read once. */
function takeCardBefore(): string {
  try {
    const v = sessionStorage.getItem(CARD_BEFORE_KEY) ?? '';
    sessionStorage.removeItem(CARD_BEFORE_KEY);
    return v;
  } catch {
    return '';
  }
}

/** What Stripe Checkout's return URL says, read once; the address bar loses it after. */
function takeCardSetupResult(): Returned {
  const params = new URLSearchParams(location.search);
  const value = params.get('card_setup');
  if (value === null) return null;
  history.replaceState(null, '', '/billing');
  return value === 'done' ? 'done' : 'cancelled';
}

export function BillingPage(props: { me: Me; refreshMe: () => Promise<void> }) {
  const [returned] = useState<Returned>(takeCardSetupResult);
  const [billing, setBilling] = useState<Billing | null>(null);
  const [invoices, setInvoices] = useState<Invoice[] | null>(null);
  const [loadError, setLoadError] = useState('');
  const [actionError, setActionError] = useState('');
  const [busy, setBusy] = useState(false);
  const [confirmRemove, setConfirmRemove] = useState(false);
  const [removeError, setRemoveError] = useState('');
  const [note, setNote] = useState('');
  const [waitingForCard, setWaitingForCard] = useState(returned === 'done');
  const [cardBefore] = useState(takeCardBefore);

  const load = useCallback(async () => {
    try {
      const [b, inv] = await Promise.all([
        api<Billing>('GET', '/api/v1/billing'),
        api<Page<Invoice>>('GET', '/api/v1/billing/invoices'),
      ]);
      setBilling(b);
      setInvoices(inv.items);
      setLoadError('');
      return b;
    } catch (e) {
      setLoadError(messageOf(e));
      return null;
    }
  }, []);

  useEffect(() => {
    void load();
  }, [load]);

  // The payment banner leads to /billing#add-card: once the page shows, that is where focus goes.
  useEffect(() => {
    if (!billing || location.hash !== '#add-card') return;
    document.getElementById('add-card')?.focus();
  }, [billing !== null]);

  // Back from Checkout: Stripe tells the server through its webhook, which may come a moment
  // after the browser. Look again every 2 s for up to a minute.
  useEffect(() => {
    if (!waitingForCard) return;
    let tries = 0;
    const t = setInterval(async () => {
      tries++;
      const b = await load();
      const m = b?.payment_method ?? null;
      if ((m && m.provider !== 'manual' && cardKey(m) !== cardBefore) || tries >= 30) {
        setWaitingForCard(false);
        void props.refreshMe();
      }
    }, 2000);
    return () => clearInterval(t);
  }, [waitingForCard, load]);

  const addCard = async () => {
    setActionError('');
    setBusy(true);
    try {
      const r = await api<{ url: string }>('POST', '/api/v1/billing/card-setup');
      try {
        sessionStorage.setItem(CARD_BEFORE_KEY, cardKey(billing?.payment_method ?? null));
      } catch {
        // no storage: coming back, the first card seen is taken as the new one
      }
      location.assign(r.url);
    } catch (e) {
      setActionError(messageOf(e));
      setBusy(false);
    }
  };

  const removeCard = async () => {
    setRemoveError('');
    setBusy(true);
    try {
      const r = await api<Billing & { message?: string }>('DELETE', '/api/v1/billing/payment-method');
      setBilling(r);
      setConfirmRemove(false);
      setNote(r.message ?? 'The payment method is removed.');
      void props.refreshMe();
    } catch (e) {
      setRemoveError(messageOf(e));
    } finally {
      setBusy(false);
    }
  };

  const method = billing?.payment_method ?? null;
  const hold = billing?.payment_hold ?? null;
  const ownMethod = billing?.own_payment_method ?? null;
  const manages = billing?.account.may_manage ?? false;
  const cardTaking = billing ? billing.provider !== 'manual' : false;

  return (
    <main id="main" class="page narrow">
      <div class="page-head">
        <h1>Billing</h1>
        {billing ? (
          <span class="muted">
            {billing.account.kind === 'team' ? `Team ${billing.account.name}` : 'Billed to you alone'}
          </span>
        ) : null}
      </div>
      {returned === 'done' ? (
        <p class="form-ok" role="status">
          {waitingForCard
            ? 'Card setup finished. Waiting for Stripe to confirm the card…'
            : method && method.provider !== 'manual' && cardKey(method) !== cardBefore
              ? `Card added: ${cardName(method)}.${hold ? '' : ' You can launch instances now.'}`
              : 'Card setup finished, but Stripe has not confirmed a card yet. Reload this page in a minute.'}
        </p>
      ) : returned === 'cancelled' ? (
        <p class="form-notice" role="status">
          Card setup cancelled: nothing was added or charged.
        </p>
      ) : null}
      {note ? (
        <p class="form-ok" role="status">
          {note}
        </p>
      ) : null}
      {loadError ? (
        <p class="form-error" role="alert">
          {loadError}{' '}
          <button type="button" class="link" onClick={() => void load()}>
            Try again
          </button>
        </p>
      ) : null}
      {!billing ? (
        loadError ? null : (
          <p class="muted" aria-busy="true">
            Loading billing…
          </p>
        )
      ) : (
        <>
          {hold ? (
            <section class="card section" aria-labelledby="hold-title" data-testid="payment-hold">
              <h2 id="hold-title">A payment failed</h2>
              <p>
                The payment of invoice <strong>{hold.invoice_id}</strong> failed (
                {formatFullTime(hold.since)}). Launching and restarting instances wait until it is
                paid; running instances keep running.
              </p>
              <p class="muted">
                {manages
                  ? cardTaking
                    ? "Pay it from the link in Stripe's mail, or add a card: a new card is charged for this invoice at once."
                    : 'Pay it as the operator asks you to.'
                  : "The team's owner settles it: ask them to pay it or add a card."}
              </p>
            </section>
          ) : null}
          <section class="card section" aria-labelledby="method-title">
            <h2 id="method-title">Payment method</h2>
            {!manages ? (
              <div class="managed" data-testid="billing-managed">
                <p>
                  Billing managed by <strong>{billing.account.name}</strong>. The team's owner adds
                  and changes its payment method; your instances are billed to the team.
                </p>
                <p class="muted">
                  {method
                    ? 'A payment method is on file, so you can launch instances.'
                    : 'No payment method is on file yet: launching waits until the owner adds one.'}
                </p>
              </div>
            ) : method ? (
              <>
                <p class="card-on-file" data-testid="payment-method">
                  <strong>{cardName(method)}</strong>
                  {method.exp_month && method.exp_year ? (
                    <span class="muted">
                      {' '}
                      · expires {String(method.exp_month).padStart(2, '0')}/{method.exp_year}
                    </span>
                  ) : null}
                </p>
                <p class="muted">
                  {method.provider === 'manual'
                    ? 'Recorded by the operator (manual billing): the operator collects payment; no card number is stored here.'
                    : 'Held by Stripe; only its brand, last four digits and expiry are stored here.'}
                  {method.created_at ? ` On file since ${formatFullTime(method.created_at)}.` : null}
                </p>
                <div class="actions start">
                  {cardTaking ? (
                    <button type="button" class="secondary" disabled={busy} onClick={() => void addCard()}>
                      Replace card
                    </button>
                  ) : null}
                  <button
                    type="button"
                    class="danger-outline"
                    disabled={busy}
                    onClick={() => {
                      setRemoveError('');
                      setConfirmRemove(true);
                    }}
                  >
                    Remove payment method
                  </button>
                </div>
              </>
            ) : (
              <>
                <p>
                  <strong>No payment method on file.</strong> Launching and restarting instances
                  need one; joining a queue does not.
                </p>
                {billing.how_to_add && !cardTaking ? (
                  <p class="muted" id="add-card" tabIndex={-1}>
                    {billing.how_to_add}
                  </p>
                ) : null}
                {cardTaking ? (
                  <>
                    <p class="muted">
                      Stripe's page takes the card; it comes back here when you are done.
                    </p>
                    <div class="actions start">
                      <button type="button" id="add-card" class="primary" disabled={busy} onClick={() => void addCard()}>
                        Add a card
                      </button>
                    </div>
                  </>
                ) : null}
                {props.me.is_operator ? (
                  <p class="muted" data-testid="operator-set-card">
                    As this server's operator you can also record one from the command line:{' '}
                    <code>
                      <CommandWords text={`gpuwerk admin billing set-card ${props.me.email}`} />
                    </code>{' '}
                    with the card's <code class="word">--brand</code>, <code class="word">--last4</code> and{' '}
                    <code class="word">--exp</code>.
                  </p>
                ) : null}
              </>
            )}
            {ownMethod ? (
              <p class="muted" data-testid="own-payment-method">
                Your own card, {cardName(ownMethod)}, stays yours: it pays again when you are in no
                team.
              </p>
            ) : null}
            {actionError ? (
              <p class="form-error" role="alert">
                {actionError}
              </p>
            ) : null}
          </section>

          <section class="card section" aria-labelledby="month-title">
            <h2 id="month-title">
              This month{billing.current_month ? ` (${billing.current_month.month}, UTC)` : ''}
            </h2>
            {billing.current_month ? (
              <>
                <p class="running-total" data-testid="running-total">
                  {billing.current_month.totals.length
                    ? billing.current_month.totals.map((t) => formatMoney(t)).join(' + ')
                    : 'Nothing billed yet'}
                </p>
                <p class="muted small-text">
                  {!manages
                    ? 'Your own launches so far; the team owner sees the whole team. '
                    : 'So far, counting live instances up to their last sign of life. '}
                  As of {formatFullTime(billing.current_month.as_of)} ({zoneLabel()}).
                </p>
              </>
            ) : (
              <p class="muted">This server keeps no invoices.</p>
            )}
          </section>

          <section class="section" aria-labelledby="invoices-title">
            <h2 id="invoices-title">Invoices</h2>
            {invoices === null ? null : invoices.length === 0 ? (
              <p class="muted">No invoices yet: a month's invoice is made once the month is over.</p>
            ) : (
              <div class="invoices">
                {invoices.map((inv) => (
                  <InvoiceDetails key={inv.id} invoice={inv} />
                ))}
              </div>
            )}
          </section>
        </>
      )}
      {confirmRemove && method ? (
        <ConfirmDialog
          title="Remove the payment method?"
          body={
            <>
              <p>
                This removes <strong>{cardName(method)}</strong>
                {billing?.account.kind === 'team' ? ` from ${billing.account.name}` : ''}.
              </p>
              <p>
                Running instances keep running and billing. New launches and restarts are refused
                until a payment method is on file again.
              </p>
            </>
          }
          confirm="Remove payment method"
          danger
          busy={busy}
          error={removeError}
          onConfirm={() => void removeCard()}
          onCancel={() => setConfirmRemove(false)}
        />
      ) : null}
    </main>
  );
}

function cardName(m: PaymentMethod): string {
  const brand = m.brand ? m.brand.charAt(0).toUpperCase() + m.brand.slice(1) : 'Card';
  return m.last4 ? `${brand} ending ${m.last4}` : brand;
}

function InvoiceDetails(props: { invoice: Invoice }) {
  const inv = props.invoice;
  return (
    <details class="card invoice" data-invoice={inv.month}>
      <summary>
        <span class="invoice-month">{inv.month}</span>
        <span class="invoice-total">{formatMoney({ amount_minor: inv.total_minor, currency: inv.currency })}</span>
        <span class="muted small-text">
          {inv.lines.length} {inv.lines.length === 1 ? 'line' : 'lines'}
        </span>
      </summary>
      <div class="table-scroll">
        <table class="data">
          <caption class="visually-hidden">Lines of the invoice for {inv.month}</caption>
          <TableHead columns={['Instance', 'GPU type', { label: 'Minutes', num: true }, { label: 'Price', num: true }, { label: 'Amount', num: true }]} />
          <tbody>
            {inv.lines.map((l) => (
              <tr key={l.billing_session_id}>
                <td>
                  {l.instance_name}
                  <br />
                  <code class="muted">{l.instance_id}</code>
                </td>
                <td>{l.gpu_type}</td>
                <td class="num">{l.minutes}</td>
                <td class="num">{formatMoney({ amount_minor: l.price_minor_per_hour, currency: l.currency })} / h</td>
                <td class="num">{formatMoney(l)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p class="muted small-text">Made {formatFullTime(inv.created_at)}. Each line is rounded once.</p>
    </details>
  );
}
