// The console's frame: sign in, then the screens (Videos, Voices, Batches, Usage, Account) chosen by the URL's
// hash (`#/usage?range=30d`: a screen may keep its own state after a `?`), so that each screen has an
// address and the browser's back button works.
import { lazy, Suspense, useEffect, useState } from 'react';
import Container from 'react-bootstrap/Container';
import Nav from 'react-bootstrap/Nav';
import Navbar from 'react-bootstrap/Navbar';
import Spinner from 'react-bootstrap/Spinner';
import { onUnauthorized, session } from './api';
import { SignIn } from './SignIn';
import { VideosScreen } from './videos/VideosScreen';
import { VoicesScreen } from './voices/VoicesScreen';
import { AccountScreen } from './account/AccountScreen';
import { BatchesScreen } from './batches/BatchesScreen';

const SCREENS = { videos: 'Videos', voices: 'Voices', batches: 'Batches', usage: 'Usage', account: 'Account' } as const;
type Screen = keyof typeof SCREENS;

// The Usage screen's charts are most of the console's code: loaded (a chunk of the bundle) when it opens.
const UsageScreen = lazy(() => import('./usage/UsageScreen').then((m) => ({ default: m.UsageScreen })));

/** The screen the hash names, if any: `#/usage?range=7d` names `usage`. */
function namedScreen(): Screen | null {
  const name = location.hash.replace(/^#\/?/, '').split('?')[0]!;
  return name in SCREENS ? (name as Screen) : null;
}

function screenOfHash(): Screen {
  return namedScreen() ?? 'videos';
}

export function App() {
  const [key, setKey] = useState(session.key());
  const [notice, setNotice] = useState<string | null>(null);
  const [screen, setScreen] = useState(screenOfHash());

  useEffect(() => {
    const follow = () => setScreen(screenOfHash());
    window.addEventListener('hashchange', follow);
    return () => window.removeEventListener('hashchange', follow);
  }, []);
  useEffect(
    () =>
      onUnauthorized(() => {
        session.signOut();
        setKey(null);
        setNotice('Your API key is no longer accepted: sign in again.');
      }),
    [],
  );
  useEffect(() => {
    document.title = key ? `${SCREENS[screen]} - Console` : 'Sign in - Console';
  }, [key, screen]);

  if (!key) {
    return (
      <SignIn
        notice={notice}
        onSignedIn={(k) => {
          session.signIn(k);
          setNotice(null);
          setKey(k);
          if (!namedScreen()) location.hash = '#/videos';
        }}
      />
    );
  }

  return (
    <>
      <Navbar bg="dark" data-bs-theme="dark" className="mb-3">
        <Container className="flex-wrap gap-2">
          <Navbar.Brand href="#/videos">Console</Navbar.Brand>
          <Nav as="nav" aria-label="Screens" className="flex-row flex-wrap gap-3 me-auto">
            {(Object.keys(SCREENS) as Screen[]).map((s) => (
              <Nav.Link key={s} href={`#/${s}`} active={s === screen} aria-current={s === screen ? 'page' : undefined}>
                {SCREENS[s]}
              </Nav.Link>
            ))}
          </Nav>
          <Nav className="flex-row">
            <Nav.Link
              href="#/signin"
              onClick={() => {
                session.signOut();
                setKey(null);
              }}
            >
              Sign out
            </Nav.Link>
          </Nav>
        </Container>
      </Navbar>
      <Container as="main" className="pb-5">
        <h1 className="visually-hidden">{SCREENS[screen]}</h1>
        {screen === 'videos' && <VideosScreen />}
        {screen === 'voices' && <VoicesScreen />}
        {screen === 'batches' && <BatchesScreen />}
        {screen === 'usage' && (
          <Suspense
            fallback={
              <Spinner animation="border" role="status">
                <span className="visually-hidden">Loading the Usage screen</span>
              </Spinner>
            }
          >
            <UsageScreen />
          </Suspense>
        )}
        {screen === 'account' && <AccountScreen />}
      </Container>
    </>
  );
}
