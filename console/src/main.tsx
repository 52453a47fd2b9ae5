// The console's entry point: Bootstrap's stylesheet, the console's own, and the app.
import 'bootstrap/dist/css/bootstrap.min.css';
import './console.css';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { ErrorBoundary } from './ErrorBoundary';

createRoot(document.getElementById('root')!).render(
  <ErrorBoundary>
    <App />
  </ErrorBoundary>,
);
