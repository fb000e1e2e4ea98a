// A small client-side router: the pages are the paths in routes.json (which the server also reads,
// so it serves index.html for exactly these); navigation uses the History API.
import { useEffect, useState } from 'preact/hooks';
import routes from './routes.json';

export type PagePath =
  | '/'
  | '/sign-in'
  | '/sign-up'
  | '/forgot-password'
  | '/billing'
  | '/team'
  | '/team/accept'
  | '/usage'
  | '/admin/hosts'
  | '/admin/gpu-types'
  | '/admin/instances'
  | '/admin/queues'
  | '/admin/audit'
  | '/admin/relay-sessions'
  | '/admin/people';

export const PAGES: readonly string[] = routes.paths;

const listeners = new Set<() => void>();

export function navigate(path: string, replace = false): void {
  if (path === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  listeners.forEach((l) => l());
}

addEventListener('popstate', () => listeners.forEach((l) => l()));

/** The current path, re-rendering the caller on every navigation. */
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    listeners.add(update);
    return () => {
      listeners.delete(update);
    };
  }, []);
  return path;
}

/** A link that navigates without a reload (plain clicks only; new tabs work as usual). */
export function onLinkClick(event: MouseEvent, path: string): void {
  if (event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(path);
}
