// A command line that wraps only between its words, never inside one (a flag, user@hostname): each
// word is a span that does not break (`.word` in styles.css). Its text is the command unchanged, so
// copying or selecting it still gives the one line.
import { Fragment } from 'preact';

export function CommandWords(props: { text: string }) {
  return (
    <>
      {props.text.split(' ').map((word, i) => (
        <Fragment key={i}>
          {i ? ' ' : null}
          <span class="word">{word}</span>
        </Fragment>
      ))}
    </>
  );
}
