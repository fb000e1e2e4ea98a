// Click-to-copy that never claims a copy it did not make. Where the browser offers the async
// clipboard API (a secure context: https, or http on localhost) the text is written and the
// caller says "Copied" only once the write succeeded. Elsewhere (plain http from another
// machine's address) the text is selected in the page, and the caller asks the person to press
// Ctrl+C (⌘C on a Mac).

export type CopyOutcome = 'copied' | 'selected';

export async function copyText(text: string, element: HTMLElement): Promise<CopyOutcome> {
  const clipboard = (navigator as Navigator & { clipboard?: Clipboard }).clipboard;
  if (clipboard && typeof clipboard.writeText === 'function' && window.isSecureContext) {
    try {
      await clipboard.writeText(text);
      return 'copied';
    } catch {
      // Refused (permissions, focus): fall through to selecting the text.
    }
  }
  selectContents(element);
  return 'selected';
}

export function selectContents(element: HTMLElement): void {
  const selection = window.getSelection();
  if (!selection) return;
  const range = document.createRange();
  range.selectNodeContents(element);
  selection.removeAllRanges();
  selection.addRange(range);
}

export const COPY_KEYS = /Mac|iPhone|iPad/.test(navigator.userAgent) ? '⌘C' : 'Ctrl+C';
