// The SSH command with click-to-copy. "Copied" only after the clipboard took it; without a
// clipboard API (plain http from another machine) the command is selected and the person is asked
// to press Ctrl+C. The command wraps only between its words (a long hostname scrolls in its box).
import { useEffect, useRef, useState } from 'preact/hooks';
import { COPY_KEYS, copyText, type CopyOutcome } from '../copy';
import { CommandWords } from './CommandWords';

export function CopyCommand(props: { command: string; label: string; testId?: string }) {
  const code = useRef<HTMLElement>(null);
  const [outcome, setOutcome] = useState<CopyOutcome | null>(null);
  useEffect(() => {
    if (outcome !== 'copied') return;
    const t = setTimeout(() => setOutcome(null), 2500);
    return () => clearTimeout(t);
  }, [outcome]);
  useEffect(() => setOutcome(null), [props.command]);

  const copy = async () => {
    if (!code.current) return;
    setOutcome(await copyText(props.command, code.current));
  };

  return (
    <div class="copy">
      {/* Focusable: a word wider than the box (user@hostname.ssh-domain on a phone) makes it
          scroll, and a keyboard must reach that scrolling too (WCAG 2.1.1). */}
      <code ref={code} class="copy-text" tabIndex={0} data-testid={props.testId ?? 'ssh-command'}>
        <CommandWords text={props.command} />
      </code>
      <button type="button" class="secondary small" onClick={() => void copy()}>
        {outcome === 'copied' ? 'Copied' : 'Copy'}
        <span class="visually-hidden"> {props.label}</span>
      </button>
      <span class="copy-note" role="status">
        {outcome === 'selected' ? `Selected: press ${COPY_KEYS} to copy.` : outcome === 'copied' ? 'Copied to the clipboard.' : ''}
      </span>
    </div>
  );
}
