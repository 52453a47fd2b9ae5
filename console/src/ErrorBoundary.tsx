// A rendering error shows what went wrong and a way back, instead of a blank page.
import { Component, type ReactNode } from 'react';
import Alert from 'react-bootstrap/Alert';
import Container from 'react-bootstrap/Container';

export class ErrorBoundary extends Component<{ children: ReactNode }, { error: Error | null }> {
  override state = { error: null as Error | null };

  static getDerivedStateFromError(error: Error) {
    return { error };
  }

  override render() {
    if (!this.state.error) return this.props.children;
    return (
      <Container as="main" className="py-5">
        <Alert variant="danger">
          <p>The console hit an error it could not recover from: {this.state.error.message}</p>
          <a href="/console">Reload the console</a>
        </Alert>
      </Container>
    );
  }
}
