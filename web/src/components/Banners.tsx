// The notices above every signed-in page (but the billing page, which says it all itself): an
// unconfirmed address, and no payment method on file, whose action leads to the billing
// page's "Add a card" (#add-card, focused there). A team member is told who manages billing
// instead.
import { useEffect } from 'preact/hooks';
import { onLinkClick } from '../router';
import type { Me } from '../types';

export function Banners(props: { me: Me; refreshMe: () => Promise<void> }) {
  const me = props.me;
  const missingCard = !me.billing.payment_method_on_file;
  const hold = me.billing.payment_hold;

  useEffect(() => {
    if (!missingCard && !hold) return;
    // The operator may record a card meanwhile (manual provider): look again now and then, and
    // when the person comes back to the window.
    const t = setInterval(() => void props.refreshMe(), 15000);
    const onFocus = () => void props.refreshMe();
    addEventListener('focus', onFocus);
    return () => {
      clearInterval(t);
      removeEventListener('focus', onFocus);
    };
  }, [missingCard, hold !== null]);

  const member = me.billing.account.kind === 'team' && me.role !== 'owner';
  const manual = me.billing.provider === 'manual';
  return (
    <>
      {!me.email_proven ? (
        <div class="banner warn" role="region" aria-label="Address not confirmed">
          <p>
            Confirm your address to launch instances and add keys: open the link mailed to{' '}
            <strong>{me.email}</strong>.
          </p>
        </div>
      ) : null}
      {missingCard ? (
        <div class="banner danger" role="region" aria-label="Payment method">
          {member ? (
            <p>
              Billing is managed by <strong>{me.billing.account.name}</strong>. Launching and
              restarting wait until its owner adds a payment method.
            </p>
          ) : (
            <>
              <p>
                <strong>No payment method on file.</strong> Launching and restarting instances need
                one; joining a queue does not.
                {manual ? ' On this server the operator records cards.' : null}
              </p>
              <a class="button light" href="/billing#add-card" onClick={(e) => onLinkClick(e, '/billing#add-card')}>
                {manual ? 'How to add one' : 'Add a card'}
              </a>
            </>
          )}
        </div>
      ) : null}
      {hold && !missingCard ? (
        <div class="banner danger" role="region" aria-label="Payment failed">
          <p>
            <strong>A payment failed</strong> (invoice {hold.invoice_id}). Launching and restarting
            wait until it is paid.
            {member ? ' Ask the team\'s owner to pay it or add a card.' : null}
          </p>
          {member ? null : (
            <a class="button light" href="/billing" onClick={(e) => onLinkClick(e, '/billing')}>
              Pay or add a card
            </a>
          )}
        </div>
      ) : null}
    </>
  );
}
