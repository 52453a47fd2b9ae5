// Videos: the form that makes a job (left, or first on a phone) and the job list (right).
import { useEffect, useState } from 'react';
import Col from 'react-bootstrap/Col';
import Row from 'react-bootstrap/Row';
import Spinner from 'react-bootstrap/Spinner';
import { api, type ListPage, type Model, type VideoModel } from '../api';
import { ErrorAlert } from '../ErrorAlert';
import { CreateVideo } from './CreateVideo';
import { JobList } from './JobList';

export function VideosScreen() {
  const [models, setModels] = useState<VideoModel[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [created, setCreated] = useState(0);

  useEffect(() => {
    api<ListPage<Model>>('/v2/models').then((page) => setModels(page.data.filter((m): m is VideoModel => m.kind === 'video')), setError);
  }, []);

  return (
    <Row className="g-4">
      <Col lg={5}>
        <ErrorAlert error={error} />
        {models ? (
          <CreateVideo models={models} onCreated={() => setCreated((k) => k + 1)} />
        ) : (
          !error && (
            <Spinner animation="border" role="status">
              <span className="visually-hidden">Loading models</span>
            </Spinner>
          )
        )}
      </Col>
      <Col lg={7}>
        <JobList modelIds={models?.map((m) => m.id) ?? []} refreshToken={created} />
      </Col>
    </Row>
  );
}
