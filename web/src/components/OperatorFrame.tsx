// Where an operator page goes: the pages themselves (OperatorPages.tsx) are imported only when an
// operator opens one, so their code is a chunk of its own that no first visit and no one else
// loads. Someone who is not an operator gets a sentence, not the chunk (the API refuses them too).
import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { messageOf } from '../api';
import type { Me } from '../types';

type Pages = ComponentType<{ path: string; me: Me }>;

export function OperatorFrame(props: { path: string; me: Me }) {
  const [Pages, setPages] = useState<Pages | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    if (!props.me.is_operator) return;
    import('./OperatorPages').then(
      (m) => setPages(() => m.default),
      (e) => setError(`The operator pages could not be loaded: ${messageOf(e)}`),
    );
  }, [props.me.is_operator]);
  if (!props.me.is_operator) {
    return (
      <main id="main" class="page narrow">
        <h1>Operators only</h1>
        <p>This page is for the platform's operators.</p>
      </main>
    );
  }
  if (Pages) return <Pages path={props.path} me={props.me} />;
  return (
    <main id="main" class="page" aria-busy={error ? undefined : 'true'}>
      {error ? (
        <p class="form-error" role="alert">
          {error}
        </p>
      ) : (
        <p class="muted">Loading…</p>
      )}
    </main>
  );
}
